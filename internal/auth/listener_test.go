package auth

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is testdata/procnet: /proc/net/tcp and tcp6 as a little-endian
// Linux host writes them.
const fixture = "testdata/procnet"

func littleEndian(t *testing.T) {
	t.Helper()
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the fixture holds a little-endian host's addresses")
	}
}

// TestS1ForeignListenerRefused: the CLI does not send a token it found by
// itself to a port another OS user listens on (port squatting), and does
// to its own user's or root's listener.
func TestS1ForeignListenerRefused(t *testing.T) {
	t.Parallel()
	littleEndian(t)
	const me = 1000
	for url, refused := range map[string]bool{
		"http://127.0.0.1:7420":   true,  // 127.0.0.1 by uid 1001
		"http://localhost:7420":   true,  // the same, through localhost
		"http://127.0.0.1:7421":   false, // 0.0.0.0 by me
		"http://[::1]:7421":       false, // an IPv4 wildcard does not take ::1
		"http://127.0.0.1:7422":   true,  // :: (both families) by uid 1001
		"http://[::1]:7422":       true,
		"http://127.0.0.1:7423":   false, // mine on 127.0.0.1 wins over 0.0.0.0 of uid 1001
		"http://127.0.0.2:7423":   true,  // ... which takes the other addresses
		"http://127.0.0.1:7424":   false, // a connection of uid 1001, no listener
		"http://[::1]:7425":       false, // root
		"http://localhost:7425":   false,
		"http://127.0.0.1:7426":   true,  // ::ffff:127.0.0.1 by uid 1001
		"http://127.0.1.1:7427":   true,  // 0101007F: 127.0.1.1, as Debian names the host
		"http://127.0.0.1:9999":   false, // nothing listens: the connection fails anyway
		"http://drover.test:7420": false, // a name: not checked
	} {
		err := checkListenerOwner(url, fixture, me)
		if got := errors.Is(err, ErrForeignListener); got != refused {
			t.Errorf("%s: error %v, want refused=%v", url, err, refused)
		}
		if refused && (err == nil || !strings.Contains(err.Error(), "belongs to another user (uid 1001)") || !strings.Contains(err.Error(), "--token")) {
			t.Errorf("%s: error %v does not say who and how to override", url, err)
		}
	}
	// The owner itself is fine everywhere.
	if err := checkListenerOwner("http://127.0.0.1:7420", fixture, 1001); err != nil {
		t.Errorf("owner refused: %v", err)
	}
}

// TestS1ListenerCheckWithoutProc: without /proc/net (not Linux) nothing is
// checked; a malformed file is an error.
func TestS1ListenerCheckWithoutProc(t *testing.T) {
	t.Parallel()
	if err := checkListenerOwner("http://127.0.0.1:7420", filepath.Join(t.TempDir(), "none"), 1000); err != nil {
		t.Errorf("without /proc/net: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tcp"), []byte("header\n 0: XYZ:1CFC 00000000:0000 0A 0:0 0:0 0 1000 0 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkListenerOwner("http://127.0.0.1:7420", dir, 1000); err == nil || errors.Is(err, ErrForeignListener) {
		t.Errorf("malformed file: %v", err)
	}
}

// TestS1OwnListenerAccepted: on this host (Linux), a port this process
// listens on passes the check.
func TestS1OwnListenerAccepted(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(filepath.Join(procNet, "tcp")); err != nil {
		t.Skip("no /proc/net/tcp")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := CheckListenerOwner("http://" + ln.Addr().String()); err != nil {
		t.Errorf("own listener: %v", err)
	}
	// The fixture's reading of a real file: our listener is in it.
	f, err := os.Open(filepath.Join(procNet, "tcp"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	socks, err := parseProcNetTCP(f)
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	found := false
	for _, l := range socks {
		found = found || (l.addr.Port() == port && l.addr.Addr().String() == "127.0.0.1" && l.uid == os.Getuid())
	}
	if !found {
		t.Errorf("listener 127.0.0.1:%d of uid %d not found in %v", port, os.Getuid(), socks)
	}
}
