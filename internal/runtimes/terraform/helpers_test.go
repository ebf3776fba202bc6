package terraform

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSplitWords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"":                             nil,
		"  -upgrade  ":                 {"-upgrade"},
		"-a -b\t-c\n-d":                {"-a", "-b", "-c", "-d"},
		`-backend-config="key=a b"`:    {"-backend-config=key=a b"},
		`-x='it''s' "q\"d" a\ b`:       {"-x=its", `q"d`, "a b"},
		`"a\nb" 'c\d' e\f`:             {`a\nb`, `c\d`, "ef"},
		`'' ""`:                        {"", ""},
		`-backend-config=bucket=$HOME`: {"-backend-config=bucket=$HOME"},
		"\"line\\\ncontinued\"":        {"linecontinued"},
	} {
		got, err := splitWords(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`"open`, `'open`, `trailing\`} {
		if _, err := splitWords(in); err == nil {
			t.Errorf("splitWords(%q): no error", in)
		}
	}
}

func TestParseInitArgs(t *testing.T) {
	t.Parallel()
	a, err := parseInitArgs(`-upgrade -backend-config "bucket=my bucket" --reconfigure -lockfile readonly -plugin-dir=/p -get=false -migrate-state`)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.opts) != 5 {
		t.Errorf("%d tfexec options, want 5 (upgrade, backend-config, reconfigure, plugin-dir, get)", len(a.opts))
	}
	if a.extra != "-lockfile readonly -migrate-state" {
		t.Errorf("extra %q", a.extra)
	}
	if len(a.words) != 9 {
		t.Errorf("words %q", a.words)
	}
	for _, bad := range []string{`-backend-config`, `-upgrade=maybe`, `-input=true`, `-json`, `"open`} {
		if _, err := parseInitArgs(bad); err == nil {
			t.Errorf("parseInitArgs(%q): no error", bad)
		}
	}
	if a, err := parseInitArgs(`-x='a b' it's`); err == nil {
		t.Errorf("unterminated quote accepted: %+v", a)
	}
	a, err = parseInitArgs(`-test-directory="my tests"`)
	if err != nil || a.extra != `'-test-directory=my tests'` {
		t.Errorf("quoted extra %q, %v", a.extra, err)
	}
	if w, _ := splitWords(quoteWord(`a'b "c" $d`)); len(w) != 1 || w[0] != `a'b "c" $d` {
		t.Errorf("quoteWord does not round-trip: %q", w)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSyncModule(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "module")
	lim := testLimits(t)
	write(t, filepath.Join(src, "main.tf"), "a")
	write(t, filepath.Join(src, "sub", "x.tf"), "x")
	write(t, filepath.Join(src, "terraform.tfstate"), "local state of a developer")
	write(t, filepath.Join(src, ".terraform", "junk"), "j")
	write(t, filepath.Join(src, ".git", "HEAD"), "h")
	shared := t.TempDir()
	write(t, filepath.Join(shared, "shared.tf"), "s")
	if err := os.Symlink(shared, filepath.Join(src, "linked")); err != nil {
		t.Fatal(err)
	}
	h1, err := syncModule(src, dst, lim)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"main.tf", "sub/x.tf", "linked/shared.tf"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			t.Errorf("not copied: %v", err)
		}
	}
	for _, f := range []string{"terraform.tfstate", ".terraform", ".git"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err == nil {
			t.Errorf("%s copied", f)
		}
	}
	// What terraform writes into the copy survives; what the module drops goes.
	write(t, filepath.Join(dst, "terraform.tfstate"), "state")
	write(t, filepath.Join(dst, ".terraform", "providers"), "p")
	write(t, filepath.Join(dst, lockFile), "lock")
	write(t, filepath.Join(dst, "generated.tf"), "g")
	if h, err := syncModule(src, dst, lim); err != nil || h != h1 {
		t.Fatalf("unchanged module: hash %s (was %s), %v", h, h1, err)
	}
	for f, want := range map[string]bool{"terraform.tfstate": true, ".terraform/providers": true, lockFile: true, "generated.tf": false} {
		if _, err := os.Stat(filepath.Join(dst, f)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", f, err == nil, want)
		}
	}
	if err := os.RemoveAll(filepath.Join(src, "sub")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(src, "main.tf"), "b")
	write(t, filepath.Join(src, lockFile), "module lock")
	h2, err := syncModule(src, dst, lim)
	if err != nil || h2 == h1 {
		t.Fatalf("changed module: hash %s (was %s), %v", h2, h1, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "main.tf")); string(b) != "b" {
		t.Errorf("main.tf = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, lockFile)); string(b) != "module lock" {
		t.Errorf("lock file = %q, want the module's", b)
	}
	if _, err := os.Stat(filepath.Join(dst, "sub")); err == nil {
		t.Error("removed directory still in the copy")
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "terraform.tfstate")); string(b) != "state" {
		t.Errorf("state = %q", b)
	}
	if _, err := syncModule(filepath.Join(src, "missing"), dst, lim); err == nil {
		t.Error("missing module: no error")
	}
	if _, err := syncModule(filepath.Join(src, "main.tf"), dst, lim); err == nil {
		t.Error("module path is a file: no error")
	}
}

func TestPlanSummary(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]string{
		"Terraform will perform the following actions:\n...\nPlan: 1 to add, 0 to change, 0 to destroy.\n":     "Plan: 1 to add, 0 to change, 0 to destroy.",
		"Note: Objects have changed outside of Terraform\n\n...\nPlan: 0 to add, 1 to change, 0 to destroy.\n": "Objects have changed outside of Terraform. Plan: 0 to add, 1 to change, 0 to destroy.",
		"Changes to Outputs:\n  + v = 1\n": "Plan: changes to outputs only.",
		"":                                 "Plan: changes pending.",
	} {
		if got := planSummary(out); got != want {
			t.Errorf("planSummary(%q) = %q, want %q", out, got, want)
		}
	}
}

func TestErrorExcerpt(t *testing.T) {
	t.Parallel()
	got := errorExcerpt("Warning: x\n\n│ Error: Unclosed configuration block\n│\n│   on main.tf line 1\n")
	if got != "Error: Unclosed configuration block on main.tf line 1" {
		t.Errorf("%q", got)
	}
	if got := errorExcerpt(strings.Repeat("x", 5000)); len(got) != 1024 {
		t.Errorf("len %d", len(got))
	}
}
