package schema

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Source is what the generator needs from the config package's source code,
// which reflection cannot see.
type Source struct {
	// Docs maps type names ("Service") and fields ("Service.Name", by Go field
	// name) to their doc comments, normalised to one line per paragraph.
	Docs map[string]string
	// Enums maps each type with an enumValues method to the values it returns,
	// in order (the decoder also accepts the index of a value).
	Enums map[string][]string
	// Patterns maps package-level variables initialised with
	// regexp.MustCompile to their expression.
	Patterns map[string]string
}

// ReadSource parses the Go files of the config package in dir (test files
// excepted).
func ReadSource(dir string) (*Source, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	src := &Source{Docs: map[string]string{}, Enums: map[string][]string{}, Patterns: map[string]string{}}
	fset := token.NewFileSet()
	var names []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if err := src.addFile(fset, f); err != nil {
			return nil, err
		}
	}
	return src, nil
}

func (s *Source) addFile(fset *token.FileSet, f *ast.File) error {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.GenDecl:
			switch d.Tok {
			case token.TYPE:
				s.addTypes(d)
			case token.VAR:
				s.addPatterns(d)
			default:
			}
		case *ast.FuncDecl:
			if d.Name.Name != "enumValues" || d.Recv == nil || len(d.Recv.List) != 1 {
				continue
			}
			pos := fset.Position(d.Pos())
			recv, ok := d.Recv.List[0].Type.(*ast.Ident)
			if !ok {
				return fmt.Errorf("%s: enumValues must have a value receiver of a named type", pos)
			}
			values, err := enumLiteral(d)
			if err != nil {
				return fmt.Errorf("%s: %s.enumValues: %w", pos, recv.Name, err)
			}
			s.Enums[recv.Name] = values
		}
	}
	return nil
}

func (s *Source) addTypes(d *ast.GenDecl) {
	for _, spec := range d.Specs {
		ts := spec.(*ast.TypeSpec)
		doc := ts.Doc
		if doc == nil && len(d.Specs) == 1 {
			doc = d.Doc
		}
		if text := cleanDoc(doc); text != "" {
			s.Docs[ts.Name.Name] = text
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			continue
		}
		for _, field := range st.Fields.List {
			doc := field.Doc
			if doc == nil {
				doc = field.Comment
			}
			text := cleanDoc(doc)
			if text == "" {
				continue
			}
			for _, name := range field.Names {
				s.Docs[ts.Name.Name+"."+name.Name] = text
			}
		}
	}
}

func (s *Source) addPatterns(d *ast.GenDecl) {
	for _, spec := range d.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, v := range vs.Values {
			call, ok := v.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 || i >= len(vs.Names) {
				continue
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "MustCompile" {
				continue
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "regexp" {
				continue
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if expr, err := strconv.Unquote(lit.Value); err == nil {
					s.Patterns[vs.Names[i].Name] = expr
				}
			}
		}
	}
}

// enumLiteral returns the strings of the `return []string{...}` that must be
// the whole body of an enumValues method.
func enumLiteral(d *ast.FuncDecl) ([]string, error) {
	if d.Body == nil || len(d.Body.List) != 1 {
		return nil, fmt.Errorf("body must be a single return of a []string literal")
	}
	ret, ok := d.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return nil, fmt.Errorf("body must be a single return of a []string literal")
	}
	lit, ok := ret.Results[0].(*ast.CompositeLit)
	if !ok {
		return nil, fmt.Errorf("must return a []string literal")
	}
	values := make([]string, 0, len(lit.Elts))
	for _, e := range lit.Elts {
		bl, ok := e.(*ast.BasicLit)
		if !ok || bl.Kind != token.STRING {
			return nil, fmt.Errorf("values must be string literals")
		}
		v, err := strconv.Unquote(bl.Value)
		if err != nil {
			return nil, err
		}
		values = append(values, v)
	}
	if len(values) == 0 {
		return nil, fmt.Errorf("no values")
	}
	return values, nil
}

// cleanDoc joins the lines of each paragraph of a comment: editors wrap
// descriptions themselves.
func cleanDoc(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	var paras []string
	for p := range strings.SplitSeq(strings.TrimSpace(cg.Text()), "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			paras = append(paras, p)
		}
	}
	return strings.Join(paras, "\n\n")
}
