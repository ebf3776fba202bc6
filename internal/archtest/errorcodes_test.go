package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// codePackages are the packages that write, wrap or compare API error codes.
var codePackages = []string{"internal/server/...", "internal/auth", "api/client", "internal/cli", "internal/daemon"}

// apiV1 declares the error codes (api/v1/errors.go).
const apiV1 = Module + "/api/v1"

// TestErrorCodesAreDeclared fails for every API error code the code of
// codePackages spells itself (a string literal, a constant of its own, a
// conversion) instead of naming one of api/v1's ErrorCode constants: a
// client can rely only on the codes declared there. It type-checks the
// packages' non-test files, so that a literal passed where an ErrorCode is
// expected is found however it is written; "" (no code) is allowed.
func TestErrorCodesAreDeclared(t *testing.T) {
	t.Parallel()
	pkgs, exports, err := listExports(codePackages)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	checked := 0
	for _, p := range pkgs {
		var files []*ast.File
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: imp}
		if _, err := conf.Check(p.path, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.path, err)
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				e, ok := n.(ast.Expr)
				if !ok {
					return true
				}
				tv, ok := info.Types[e]
				if !ok || tv.Value == nil || !isErrorCode(tv.Type) {
					return true
				}
				checked++
				if declaredCode(ast.Unparen(e), info) || tv.Value.ExactString() == `""` {
					return false
				}
				t.Errorf("%s: error code %s is not one of api/v1's ErrorCode constants: use (or declare) apiv1.Code...",
					fset.Position(e.Pos()), tv.Value.ExactString())
				return false
			})
		}
	}
	if checked < 50 {
		// The server writes about a hundred; far fewer means the scan
		// no longer sees them (the code's type was renamed or moved).
		t.Errorf("saw only %d error codes in %v: is api/v1.ErrorCode still their type?", checked, codePackages)
	}
}

// isErrorCode reports whether t is api/v1's ErrorCode.
func isErrorCode(t types.Type) bool {
	n, ok := t.(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == apiV1 && n.Obj().Name() == "ErrorCode"
}

// declaredCode reports whether e names a constant of api/v1 (itself, or
// one that package auth gives another name).
func declaredCode(e ast.Expr, info *types.Info) bool {
	var id *ast.Ident
	switch x := e.(type) {
	case *ast.Ident:
		id = x
	case *ast.SelectorExpr:
		id = x.Sel
	default:
		return false
	}
	c, ok := info.Uses[id].(*types.Const)
	if !ok || c.Pkg() == nil {
		return false
	}
	return c.Pkg().Path() == apiV1 || c.Pkg().Path() == Module+"/internal/auth" && strings.HasPrefix(c.Name(), "Code")
}

type listedPackage struct {
	path, dir string
	files     []string
}

// listExports lists the packages of patterns (relative to Module) with
// their non-test Go files, and the export data of every package they
// depend on, built as go build would.
func listExports(patterns []string) ([]listedPackage, map[string]string, error) {
	args := []string{"list", "-export", "-deps", "-f", "{{if not .Standard}}{{.DepOnly}}\t{{end}}{{.ImportPath}}\t{{.Export}}\t{{.Dir}}\t{{join .GoFiles \" \"}}"}
	for _, p := range patterns {
		args = append(args, full(p))
	}
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	var pkgs []listedPackage
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) == 5 && f[0] == "false" {
			pkgs = append(pkgs, listedPackage{path: f[1], dir: f[3], files: strings.Fields(f[4])})
			f = f[1:]
		} else if len(f) == 5 {
			f = f[1:]
		}
		if len(f) >= 2 {
			exports[f[0]] = f[1]
		}
	}
	return pkgs, exports, sc.Err()
}
