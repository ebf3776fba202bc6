package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeArchive writes a .tar.gz of files (name to content; a name ending in
// / is a directory) at path.
func writeArchive(t *testing.T, path string, files map[string]string, order []string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range order {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}
		switch {
		case strings.HasSuffix(name, "/"):
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case strings.HasSuffix(name, "/drover"):
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeSums(t *testing.T, dir string, names ...string) {
	t.Helper()
	var b strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), n)
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerifySums: a file changed after SHA256SUMS was written, a file it
// does not list, and a file it lists that is gone are each found.
func TestVerifySums(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a.tar.gz", "a.cdx.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSums(t, dir, "a.tar.gz", "a.cdx.json")
	if _, err := verifySums(dir); err != nil {
		t.Fatalf("a good directory: %v", err)
	}

	if err := os.WriteFile(filepath.Join(dir, "a.cdx.json"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := verifySums(dir); err == nil || !strings.Contains(err.Error(), "a.cdx.json: SHA-256 is") {
		t.Errorf("a changed file: got %v", err)
	}
	writeSums(t, dir, "a.tar.gz")
	if _, err := verifySums(dir); err == nil || !strings.Contains(err.Error(), "a.cdx.json is not listed") {
		t.Errorf("an unlisted file: got %v", err)
	}
	writeSums(t, dir, "a.tar.gz", "a.cdx.json")
	if err := os.Remove(filepath.Join(dir, "a.tar.gz")); err != nil {
		t.Fatal(err)
	}
	if _, err := verifySums(dir); err == nil || !strings.Contains(err.Error(), "lists a.tar.gz") {
		t.Errorf("a missing file: got %v", err)
	}
}

// TestReadArchive: exactly drover, LICENSE and README.md under the
// archive's directory, or an error.
func TestReadArchive(t *testing.T) {
	const base = "drover_v1_linux_amd64"
	files := map[string]string{base + "/": "", base + "/drover": "ELF", base + "/LICENSE": "Apache", base + "/README.md": "# drover", base + "/extra": "x"}
	p := filepath.Join(t.TempDir(), base+".tar.gz")

	writeArchive(t, p, files, []string{base + "/", base + "/LICENSE", base + "/README.md", base + "/drover"})
	bin, err := readArchive(p, base)
	if err != nil || string(bin) != "ELF" {
		t.Fatalf("a good archive: %q, %v", bin, err)
	}
	writeArchive(t, p, files, []string{base + "/", base + "/LICENSE", base + "/drover"})
	if _, err := readArchive(p, base); err == nil {
		t.Error("an archive without README.md: no error")
	}
	writeArchive(t, p, files, []string{base + "/", base + "/LICENSE", base + "/README.md", base + "/drover", base + "/extra"})
	if _, err := readArchive(p, base); err == nil {
		t.Error("an archive with an extra file: no error")
	}
}

// TestCheckSBOM: the SBOM must describe drover and list exactly the linked
// modules.
func TestCheckSBOM(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.cdx.json")
	write := func(mainName string, comps ...string) {
		var cs []string
		for _, c := range comps {
			name, version, _ := strings.Cut(c, "@")
			cs = append(cs, fmt.Sprintf(`{"type":"library","name":%q,"version":%q,"purl":"pkg:golang/%s@%s?type=module"}`, name, version, name, version))
		}
		text := fmt.Sprintf(`{"bomFormat":"CycloneDX","specVersion":"1.6","metadata":{"component":{"type":"application","name":%q,"purl":"pkg:golang/%s@v0.0.0?type=module"}},"components":[%s]}`,
			mainName, mainName, strings.Join(cs, ","))
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deps := []string{"github.com/spf13/cobra@v1.10.2", "modernc.org/sqlite@v1.61.1"}

	write(module, deps...)
	if err := checkSBOM(p, deps); err != nil {
		t.Fatalf("a good SBOM: %v", err)
	}
	write(module, deps[0])
	if err := checkSBOM(p, deps); err == nil || !strings.Contains(err.Error(), "missing [modernc.org/sqlite@v1.61.1]") {
		t.Errorf("a module missing: got %v", err)
	}
	write(module, append(deps, "example.com/other@v1.0.0")...)
	if err := checkSBOM(p, deps); err == nil || !strings.Contains(err.Error(), "not linked [example.com/other@v1.0.0]") {
		t.Errorf("a module not linked: got %v", err)
	}
	write("example.com/app", deps...)
	if err := checkSBOM(p, deps); err == nil {
		t.Error("the SBOM of another module: no error")
	}
}

// TestPlatform reads GOOS and GOARCH from archive names, and refuses others.
func TestPlatform(t *testing.T) {
	c := checker{version: "v1.2.3"}
	if goos, goarch, err := c.platform("drover_v1.2.3_darwin_arm64"); err != nil || goos != "darwin" || goarch != "arm64" {
		t.Errorf("got %s %s %v", goos, goarch, err)
	}
	for _, bad := range []string{"drover_v1.2.4_linux_amd64", "drover_v1.2.3_linux", "drover_v1.2.3_linux_amd64_x"} {
		if _, _, err := c.platform(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
