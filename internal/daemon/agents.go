package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/cli"
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
	if certFile == "" {
		dir := filepath.Join(dataDir, agentTLSDir)
		certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		created, err := ensureSelfSigned(dir, certFile, keyFile, publicNames)
		if err != nil {
			return nil, "", fmt.Errorf("agent listener certificate: %w", err)
		}
		if created {
			log.Info("created a self-signed certificate for the agent listener", "cert", certFile)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, "", fmt.Errorf("agent listener certificate: %w", err)
	}
	sum := sha256.Sum256(cert.Certificate[0])
	fingerprint := hex.EncodeToString(sum[:])
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen for agents on %s: %w (choose another address with --agent-listen)", addr, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	return tls.NewListener(ln, cfg), fingerprint, nil
}

// ensureSelfSigned creates a self-signed certificate and its key unless
// both files exist. It reports whether it created them.
func ensureSelfSigned(dir, certFile, keyFile string, names []string) (bool, error) {
	_, cerr := os.Stat(certFile)
	_, kerr := os.Stat(keyFile)
	if cerr == nil && kerr == nil {
		return false, nil
	}
	if !errors.Is(cerr, fs.ErrNotExist) && cerr != nil {
		return false, cerr
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return false, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "drover agent listener", Organization: []string{"drover"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	for _, n := range names {
		if h, _, err := net.SplitHostPort(n); err == nil {
			n = h
		}
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if n != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return false, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return false, err
	}
	if err := atomicfile.Write(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return false, err
	}
	if err := atomicfile.Write(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return false, err
	}
	return true, nil
}
