package cli

import (
	"os"
	"os/user"
)

// defaultUser is who the CLI says you are when --user is not given:
// DROVER_USER, else the operating system's user (its account name, then USER
// or LOGNAME). It is "" when none is known; verbs that need a name then ask
// for --user. The server normalizes the name (trim, case fold).
func defaultUser() string {
	if v := os.Getenv("DROVER_USER"); v != "" {
		return v
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}
