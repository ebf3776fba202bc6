package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-dev/drover/internal/atomicfile"
)

// TokenFile is the name of the local token's file in the data directory.
const TokenFile = "token"

// LoadOrCreateToken returns the local token of the server with data directory
// dir: the content of dir/token, created (mode 0600) with a new random token
// at the first start. A token file that others can read is refused.
func LoadOrCreateToken(dir string) (string, error) {
	path := filepath.Join(dir, TokenFile)
	token, err := readToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return token, err
	}
	// Write beside it and link into place: the link fails if another process
	// created the file meanwhile, so two starts cannot end with two tokens.
	tmp, err := os.CreateTemp(dir, "."+TokenFile+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create the token file: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	token = NewToken()
	_, werr := tmp.WriteString(token + "\n")
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		return "", fmt.Errorf("write the token file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readToken(path)
		}
		return "", fmt.Errorf("create the token file: %w", err)
	}
	return token, nil
}

func readToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file: remove it and start again", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s can be read by other users (mode %04o): run chmod 600 on it, or remove it to get a new token", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if !validToken(token) {
		return "", fmt.Errorf("token file %s is empty or malformed: remove it and start again to get a new token", path)
	}
	return token, nil
}

func validToken(t string) bool {
	if len(t) < 16 || len(t) > 512 {
		return false
	}
	for _, c := range t {
		if !tokenChar(c) {
			return false
		}
	}
	return true
}

// tokenChar reports whether c may appear in a token: letters, digits, _ - .
func tokenChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// ConfigDir is drover's directory in the user's config directory:
// $XDG_CONFIG_HOME/drover when set (on every platform), else
// os.UserConfigDir()/drover.
func ConfigDir() (string, error) {
	base := os.Getenv("XDG_CONFIG_HOME")
	if base == "" {
		var err error
		if base, err = os.UserConfigDir(); err != nil {
			return "", err
		}
	}
	return filepath.Join(base, "drover"), nil
}

// serverKey names the directory of a server address: host_port, with
// characters a file name should not hold (the colons of IPv6) as '-'.
func serverKey(host, port string) string {
	host = strings.ToLower(strings.Trim(host, "[]"))
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, host)
	return clean + "_" + port
}

// RecordServerToken records token for the server listening on addr (as
// bound: host:port) for the current OS user, in
// ConfigDir()/servers/HOST_PORT/token (directories 0700, file 0600), where
// the CLI finds it. It returns the file's path.
func RecordServerToken(addr, token string) (string, error) {
	path, err := recordServerFile(addr, TokenFile, token)
	if err != nil {
		return "", fmt.Errorf("record the token: %w", err)
	}
	return path, nil
}

// FingerprintFile is the name of the record of a server's certificate
// fingerprint, beside its token's.
const FingerprintFile = "fingerprint"

// RecordServerFingerprint records the SHA-256 fingerprint (hex) of the
// certificate the server listening on addr serves its API with, beside its
// token, where the CLI finds it to pin the certificate.
func RecordServerFingerprint(addr, fingerprint string) (string, error) {
	path, err := recordServerFile(addr, FingerprintFile, fingerprint)
	if err != nil {
		return "", fmt.Errorf("record the certificate fingerprint: %w", err)
	}
	return path, nil
}

// recordServerFile writes content to the file name of the server on addr.
func recordServerFile(addr, name, content string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	base, err := ConfigDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "servers", serverKey(host, port))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if err := atomicfile.Write(path, []byte(content+"\n"), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// FindServerToken returns the token recorded for the server at serverURL
// (http://host:port) by RecordServerToken, and the file it came from. For a
// loopback server the loopback names (localhost, 127.0.0.1, ::1) and a
// wildcard listen (0.0.0.0, ::) on the same port are the same server; of
// several records the newest wins. It returns fs.ErrNotExist when there is
// none.
func FindServerToken(serverURL string) (token, path string, err error) {
	path, err = findServerFile(serverURL, TokenFile)
	if err != nil {
		return "", "", err
	}
	token, err = readToken(path)
	return token, path, err
}

// FindServerFingerprint returns the certificate fingerprint recorded for
// the server at serverURL (as FindServerToken finds its token), or
// fs.ErrNotExist.
func FindServerFingerprint(serverURL string) (string, error) {
	path, err := findServerFile(serverURL, FingerprintFile)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// findServerFile finds the newest file name recorded for the server at
// serverURL.
func findServerFile(serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("server URL %q: want http://HOST:PORT", serverURL)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
		if port == "" {
			port = "80"
		}
	}
	base, err := ConfigDir()
	if err != nil {
		return "", err
	}
	hosts := []string{host}
	if host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1" {
		hosts = append(hosts, "localhost", "127.0.0.1", "::1", "0.0.0.0", "::")
	}
	var newest fs.FileInfo
	var path string
	for _, h := range hosts {
		p := filepath.Join(base, "servers", serverKey(h, port), name)
		fi, err := os.Stat(p)
		if err != nil || (newest != nil && !fi.ModTime().After(newest.ModTime())) {
			continue
		}
		newest, path = fi, p
	}
	if path == "" {
		return "", fmt.Errorf("no %s recorded for %s under %s: %w", name, u.Host, filepath.Join(base, "servers"), fs.ErrNotExist)
	}
	return path, nil
}
