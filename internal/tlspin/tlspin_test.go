package tlspin

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSelfSignedAndPin: a self-signed certificate is made once; a client
// pinning its fingerprint reaches the server, one pinning another does not,
// and one without a pin does not trust it.
func TestSelfSignedAndPin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	made, err := SelfSigned(certFile, keyFile, "test", []string{"drover.example:7420", "192.0.2.7"})
	if err != nil || !made {
		t.Fatalf("SelfSigned: %v %v", made, err)
	}
	if made, err := SelfSigned(certFile, keyFile, "test", nil); err != nil || made {
		t.Fatalf("SelfSigned again: %v %v, want the existing one kept", made, err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	get := func(fingerprint string) error {
		cfg, err := Config(fingerprint, "")
		if err != nil {
			return err
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := c.Get(srv.URL)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	fp := Fingerprint(cert.Certificate[0])
	if err := get("sha256:" + strings.ToUpper(fp)); err != nil {
		t.Errorf("pinned: %v", err)
	}
	if err := get(strings.Repeat("ab", 32)); err == nil || !strings.Contains(err.Error(), "not the pinned one") {
		t.Errorf("another pin: %v", err)
	}
	if err := get(""); err == nil {
		t.Error("no pin: a self-signed certificate was trusted")
	}
	if _, err := Config("sha256:xyz", ""); err == nil {
		t.Error("a bad fingerprint was accepted")
	}
	leaf := cert.Leaf
	if leaf == nil {
		t.Fatal("no parsed leaf")
	}
	if !slices.Contains(leaf.DNSNames, "drover.example") || !slicesHasIP(leaf.IPAddresses, "192.0.2.7") || !slicesHasIP(leaf.IPAddresses, "127.0.0.1") {
		t.Errorf("names %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
}

func slicesHasIP(list []net.IP, s string) bool {
	for _, v := range list {
		if v.String() == s {
			return true
		}
	}
	return false
}
