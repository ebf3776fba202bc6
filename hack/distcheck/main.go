// Command distcheck verifies the release directory `make dist` wrote: that
// SHA256SUMS lists every archive and SBOM and that each checksum verifies;
// that each archive holds exactly drover, LICENSE and README.md; that each
// binary is for its archive's platform, static, stripped of its dynamic
// symbols, and built with the release flags (CGO_ENABLED=0, -trimpath, the
// build tags, stripped, the version); and that each CycloneDX SBOM names
// drover's module and lists exactly the modules linked into its binary. It is
// what `make dist-check` runs:
//
//	go run ./hack/distcheck -tags kustomize_disable_go_plugin_support -version v1.2.3 dist
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
)

const (
	// module is drover's module path, the SBOM's main component.
	module = "github.com/drover-dev/drover"
	// maxBinary bounds the binary read from an archive.
	maxBinary = 1 << 30
)

func main() {
	tags := flag.String("tags", "", "build tags every binary must have been built with (comma-separated)")
	version := flag.String("version", "", "the version the binaries and archive names carry")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: distcheck -tags TAGS -version V DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *version == "" {
		flag.Usage()
		os.Exit(64)
	}
	c := checker{dir: flag.Arg(0), version: *version, tags: splitTags(*tags)}
	n, err := c.check()
	if err != nil {
		fmt.Fprintln(os.Stderr, "distcheck:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stdout, "distcheck: %s: %d archives, their SBOMs and SHA256SUMS verified\n", c.dir, n)
}

// checker verifies one release directory.
type checker struct {
	dir     string
	version string
	tags    []string
}

// check verifies the directory and returns how many archives it holds.
func (c checker) check() (int, error) {
	sums, err := verifySums(c.dir)
	if err != nil {
		return 0, err
	}
	var archives []string
	for name := range sums {
		if strings.HasSuffix(name, ".tar.gz") {
			archives = append(archives, name)
		}
	}
	if len(archives) == 0 {
		return 0, fmt.Errorf("%s: no archive (*.tar.gz) in SHA256SUMS", c.dir)
	}
	sort.Strings(archives)
	for _, name := range archives {
		base := strings.TrimSuffix(name, ".tar.gz")
		goos, goarch, err := c.platform(base)
		if err != nil {
			return 0, err
		}
		bin, err := readArchive(filepath.Join(c.dir, name), base)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		deps, err := c.checkBinary(bin, goos, goarch)
		if err != nil {
			return 0, fmt.Errorf("%s: drover: %w", name, err)
		}
		sbom := base + ".cdx.json"
		if _, ok := sums[sbom]; !ok {
			return 0, fmt.Errorf("%s: no SBOM %s in SHA256SUMS", name, sbom)
		}
		if err := checkSBOM(filepath.Join(c.dir, sbom), deps); err != nil {
			return 0, fmt.Errorf("%s: %w", sbom, err)
		}
		fmt.Fprintf(os.Stdout, "distcheck: %s: %s/%s, %d modules, all in %s\n", name, goos, goarch, len(deps), sbom)
	}
	return len(archives), nil
}

// verifySums reads DIR/SHA256SUMS, checks every checksum, and that it lists
// every file of the directory but itself.
func verifySums(dir string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 || name == "" || strings.ContainsAny(name, `/\`) {
			return nil, fmt.Errorf("SHA256SUMS:%d: not `SHA256  NAME`: %q", n, sc.Text())
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("SHA256SUMS:%d: %s is listed twice", n, name)
		}
		sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name() == "SHA256SUMS" {
			continue
		}
		if _, ok := sums[e.Name()]; !ok {
			return nil, fmt.Errorf("%s is not listed in SHA256SUMS", e.Name())
		}
	}
	for name, want := range sums {
		got, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("SHA256SUMS lists %s: %w", name, err)
		}
		if got != want {
			return nil, fmt.Errorf("%s: SHA-256 is %s, SHA256SUMS says %s", name, got, want)
		}
	}
	return sums, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// platform is the GOOS and GOARCH of an archive named drover_VERSION_GOOS_GOARCH.
func (c checker) platform(base string) (string, string, error) {
	rest, ok := strings.CutPrefix(base, "drover_"+c.version+"_")
	goos, goarch, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || goos == "" || goarch == "" || strings.Contains(goarch, "_") {
		return "", "", fmt.Errorf("%s.tar.gz: not named drover_%s_GOOS_GOARCH.tar.gz", base, c.version)
	}
	return goos, goarch, nil
}

// readArchive checks that the archive holds exactly base/ with drover
// (executable), LICENSE and README.md, and returns the binary.
func readArchive(path, base string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var (
		names []string
		bin   []byte
	)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(h.Name, "/")
		names = append(names, name)
		switch name {
		case base:
			if h.Typeflag != tar.TypeDir {
				return nil, fmt.Errorf("%s is not a directory", h.Name)
			}
		case base + "/drover":
			if h.Typeflag != tar.TypeReg || h.Mode&0o111 != 0o111 {
				return nil, fmt.Errorf("%s is not an executable file (mode %o)", h.Name, h.Mode)
			}
			if bin, err = io.ReadAll(io.LimitReader(tr, maxBinary+1)); err != nil {
				return nil, err
			}
			if len(bin) > maxBinary {
				return nil, fmt.Errorf("%s is larger than %d bytes", h.Name, maxBinary)
			}
		case base + "/LICENSE", base + "/README.md":
			if h.Typeflag != tar.TypeReg || h.Size == 0 {
				return nil, fmt.Errorf("%s is not a file with content", h.Name)
			}
		}
		if h.Uid != 0 || h.Gid != 0 {
			return nil, fmt.Errorf("%s is owned by %d:%d, not 0:0", h.Name, h.Uid, h.Gid)
		}
	}
	sort.Strings(names)
	want := []string{base, base + "/LICENSE", base + "/README.md", base + "/drover"}
	if !slices.Equal(names, want) {
		return nil, fmt.Errorf("holds %v, want %v", names, want)
	}
	return bin, nil
}

// checkBinary checks the binary's format and build settings and returns the
// modules linked into it, as path@version.
func (c checker) checkBinary(bin []byte, goos, goarch string) ([]string, error) {
	if err := checkFormat(bin, goos, goarch); err != nil {
		return nil, err
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return nil, fmt.Errorf("no Go build information: %w", err)
	}
	if info.Path != module+"/cmd/drover" {
		return nil, fmt.Errorf("is the build of %s, not %s/cmd/drover", info.Path, module)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for key, want := range map[string]string{"GOOS": goos, "GOARCH": goarch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[key] != want {
			return nil, fmt.Errorf("built with %s=%q, want %q", key, settings[key], want)
		}
	}
	built := splitTags(settings["-tags"])
	for _, tag := range c.tags {
		if !slices.Contains(built, tag) {
			return nil, fmt.Errorf("built with -tags %q, which lacks %s", settings["-tags"], tag)
		}
	}
	// With -trimpath the build information leaves -ldflags out: -s -w shows as
	// the missing symbol table (checkFormat), the version in the binary's
	// answer to `drover version`, or (another platform's) in its bytes.
	if err := checkVersion(bin, goos, goarch, c.version); err != nil {
		return nil, err
	}
	var deps []string
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		deps = append(deps, d.Path+"@"+d.Version)
	}
	if len(deps) == 0 {
		return nil, errors.New("links no module besides drover's own")
	}
	return deps, nil
}

// checkVersion checks that the binary carries version: on this machine's
// platform by running `drover version`, on others by finding the string.
func checkVersion(bin []byte, goos, goarch, version string) error {
	if goos != runtime.GOOS || goarch != runtime.GOARCH {
		if !bytes.Contains(bin, []byte(version)) {
			return fmt.Errorf("does not hold the version %s", version)
		}
		return nil
	}
	dir, err := os.MkdirTemp("", "distcheck-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	path := filepath.Join(dir, "drover")
	if err := os.WriteFile(path, bin, 0o700); err != nil { //nolint:gosec // G306: the binary under test must be executable; the directory is private
		return err
	}
	out, err := exec.Command(path, "version").CombinedOutput() //nolint:gosec // G204: runs the binary just extracted from the archive being checked
	if err != nil {
		return fmt.Errorf("drover version: %w: %s", err, out)
	}
	if fields := strings.Fields(string(out)); len(fields) < 2 || fields[1] != version {
		return fmt.Errorf("drover version says %q, want the version %s", strings.TrimSpace(string(out)), version)
	}
	return nil
}

// checkFormat checks that bin is an executable for goos/goarch; on Linux
// also that it is static and exports no dynamic symbols (what linking the
// plugin package would add).
func checkFormat(bin []byte, goos, goarch string) error {
	switch goos {
	case "linux":
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			return fmt.Errorf("not an ELF file: %w", err)
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]
		if want == 0 || f.Machine != want {
			return fmt.Errorf("an ELF file for %v, not %s", f.Machine, goarch)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				return errors.New("dynamically linked (has a program interpreter or a dynamic section)")
			}
		}
		if s := f.Section(".dynsym"); s != nil {
			return fmt.Errorf("exports dynamic symbols (.dynsym, %d bytes)", s.Size)
		}
		if f.Section(".symtab") != nil {
			return errors.New("not stripped (has .symtab)")
		}
	case "darwin":
		f, err := macho.NewFile(bytes.NewReader(bin))
		if err != nil {
			return fmt.Errorf("not a Mach-O file: %w", err)
		}
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]
		if want == 0 || f.Cpu != want {
			return fmt.Errorf("a Mach-O file for %v, not %s", f.Cpu, goarch)
		}
	default:
		return fmt.Errorf("no check for GOOS %s", goos)
	}
	return nil
}

// cyclonedx is the part of a CycloneDX BOM distcheck reads.
type cyclonedx struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component component `json:"component"`
	} `json:"metadata"`
	Components []component `json:"components"`
}

type component struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
}

// checkSBOM checks that the SBOM at path is a CycloneDX BOM of drover's
// module whose Go module components are exactly deps.
func checkSBOM(path string, deps []string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var bom cyclonedx
	if err := json.Unmarshal(data, &bom); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion == "" {
		return fmt.Errorf("not a CycloneDX BOM (bomFormat %q, specVersion %q)", bom.BOMFormat, bom.SpecVersion)
	}
	if main := bom.Metadata.Component; main.Name != module || !strings.HasPrefix(main.PURL, "pkg:golang/"+module+"@") {
		return fmt.Errorf("describes %q (%s), not %s", main.Name, main.PURL, module)
	}
	listed := map[string]bool{}
	for _, c := range bom.Components {
		if strings.HasPrefix(c.PURL, "pkg:golang/") && c.Name != "std" {
			listed[c.Name+"@"+c.Version] = true
		}
	}
	linked := map[string]bool{}
	var missing []string
	for _, d := range deps {
		linked[d] = true
		if !listed[d] {
			missing = append(missing, d)
		}
	}
	var extra []string
	for m := range listed {
		if !linked[m] {
			extra = append(extra, m)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		return fmt.Errorf("lists other modules than the binary links: missing %v; not linked %v", missing, extra)
	}
	return nil
}

func splitTags(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}
