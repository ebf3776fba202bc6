// Package tlspin is how drover's clients (the CLI, the agent) check a
// server's certificate: against a pinned SHA-256 fingerprint (a self-signed
// certificate the server printed), or a CA file, or the system's roots; and
// how a server makes its self-signed certificate.
package tlspin

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Config returns a client TLS config that checks the server's certificate
// against fingerprint (when set: the pinned certificate decides, whoever
// signed it), else against caFile (when set), else the system's roots.
func Config(fingerprint, caFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", caFile)
		}
		c.RootCAs = pool
	}
	if fingerprint == "" {
		return c, nil
	}
	want, err := ParseFingerprint(fingerprint)
	if err != nil {
		return nil, err
	}
	c.InsecureSkipVerify = true
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server sent no certificate")
		}
		if got := Fingerprint(cs.PeerCertificates[0].Raw); got != want {
			return fmt.Errorf("the server's certificate (sha256:%s) is not the pinned one (sha256:%s)", got, want)
		}
		return nil
	}
	return c, nil
}

// Fingerprint is the lower-case hex SHA-256 of a DER certificate.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// ParseFingerprint returns a certificate fingerprint as lower-case hex:
// it accepts "sha256:" in front and colons between bytes.
func ParseFingerprint(s string) (string, error) {
	h := strings.ToLower(strings.TrimSpace(s))
	h = strings.TrimPrefix(h, "sha256:")
	h = strings.ReplaceAll(h, ":", "")
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("fingerprint %q: want sha256:<64 hex digits>", s)
	}
	return h, nil
}
