package cli

import (
	"fmt"
	"os"

	"github.com/drover-dev/drover/internal/usertext"
)

// userFlagHelp is the help of --user.
const userFlagHelp = "the identity you act as, checked by the server: requests are recorded under the identity of their credential " +
	"(see drover whoami), and one naming another is refused; empty sends none (env DROVER_USER)"

// defaultUser is --user when not given: DROVER_USER, else "" (the server
// records the credential's identity).
func defaultUser() string { return os.Getenv("DROVER_USER") }

// userField is the user a request names: "" when --user is not set,
// else --user normalized as the server compares names.
func (g *globals) userField() (string, error) {
	if g.user == "" {
		return "", nil
	}
	u, err := usertext.User(g.user)
	if err != nil {
		return "", usageError(fmt.Errorf("--user: %w", err))
	}
	return u, nil
}
