package v1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"slices"
	"strconv"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestErrorCodesListed: ErrorCodes lists every ErrorCode constant of
// errors.go once, and each code but internal has a status of its own.
func TestErrorCodesListed(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []apiv1.ErrorCode
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "ErrorCode" {
			for _, v := range vs.Values {
				s, err := strconv.Unquote(v.(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				declared = append(declared, apiv1.ErrorCode(s))
			}
		}
		return false
	})
	listed := apiv1.ErrorCodes()
	if len(declared) < 10 || !slices.Equal(declared, listed) {
		t.Errorf("ErrorCodes() = %v, want the constants of errors.go in their order: %v", listed, declared)
	}
	for _, c := range listed {
		if got := c.HTTPStatus(); (got == http.StatusInternalServerError) != (c == apiv1.CodeInternal) {
			t.Errorf("%s answers %d", c, got)
		}
		if c.Error() != string(c) {
			t.Errorf("%s.Error() = %q", c, c.Error())
		}
	}
	if got := apiv1.ErrorCode("no_such_code").HTTPStatus(); got != http.StatusInternalServerError {
		t.Errorf("an unknown code answers %d, want 500", got)
	}
}
