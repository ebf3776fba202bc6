package daemon

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/tlspin"
)

// agentTLSDir is where a server keeps the self-signed certificate of its
// agent listener, in its data directory.
const agentTLSDir = "agent-tls"

// agentListener listens for agents on addr over TLS, with the certificate
// of certFile and keyFile, or else the data directory's self-signed one
// (created on first use). It returns the listener and the SHA-256
// fingerprint of the certificate (hex), which agents may pin.
func agentListener(addr, certFile, keyFile, dataDir string, publicNames []string, log *slog.Logger) (net.Listener, string, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, "", cli.UsageErrorf("--agent-tls-cert and --agent-tls-key go together")
	}
	cfg, fingerprint, err := serverTLS(certFile, keyFile, filepath.Join(dataDir, agentTLSDir), "drover agent listener", publicNames, log)
	if err != nil {
		return nil, "", fmt.Errorf("agent listener certificate: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen for agents on %s: %w (choose another address with --agent-listen)", addr, err)
	}
	return tls.NewListener(ln, cfg), fingerprint, nil
}

// serverTLS is the TLS config of a listener with the certificate of
// certFile and keyFile, or else the self-signed one in dir (created on
// first use, named cn, valid for localhost, the loopback addresses, this
// host's name and names), and its certificate's fingerprint (hex SHA-256).
func serverTLS(certFile, keyFile, dir, cn string, names []string, log *slog.Logger) (*tls.Config, string, error) {
	if certFile == "" {
		certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		created, err := tlspin.SelfSigned(certFile, keyFile, cn, names)
		if err != nil {
			return nil, "", err
		}
		if created {
			log.Info("created a self-signed certificate", "for", cn, "cert", certFile)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, "", err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	return cfg, tlspin.Fingerprint(cert.Certificate[0]), nil
}
