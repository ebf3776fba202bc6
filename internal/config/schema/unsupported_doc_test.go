package schema

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
)

// TestUnsupportedFieldsDocumented keeps docs/config.md's "Not supported yet"
// list, which the README links for what "unchanged" leaves out, the same as
// the fields the decoder refuses: every config.Unsupported field's name must
// be in it, in backquotes (alone or as the last part of a dotted path).
func TestUnsupportedFieldsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Not supported yet\n")
	if start < 0 {
		t.Fatal(`docs/config.md has no "## Not supported yet" section`)
	}
	section := doc[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	names := map[string][]string{} // JSON name -> the types holding it
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || t.PkgPath() != configPkg {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if f.Type == unsupportedType {
				names[name] = append(names[name], t.Name())
				continue
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[config.File]())
	if len(names) == 0 {
		t.Fatal("found no config.Unsupported field: the walk is broken")
	}
	var missing []string
	for name, in := range names {
		if !regexp.MustCompile("[`.]" + regexp.QuoteMeta(name) + "[`.]").MatchString(section) {
			sort.Strings(in)
			missing = append(missing, name+" (in "+strings.Join(in, ", ")+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/config.md's \"Not supported yet\" does not name these refused fields:\n  %s", strings.Join(missing, "\n  "))
	}
}
