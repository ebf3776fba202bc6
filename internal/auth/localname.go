package auth

import (
	"os"
	"os/user"
)

// LocalName is the name of the local identity: the operating system's user
// running the server (its account name, then USER or LOGNAME), which is who
// holds the local token; "local" when none is known.
func LocalName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "local"
}
