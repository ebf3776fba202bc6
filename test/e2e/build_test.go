package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBuildTagsAgree: every build of drover uses the same build tags: the
// Makefile's BUILD_TAGS (make build, dist, test, lint), this package's
// buildTags (the binary under test), and the Dockerfile, which builds with
// make build.
func TestBuildTagsAgree(t *testing.T) {
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	m := regexp.MustCompile(`(?m)^BUILD_TAGS :?= *(.*?) *$`).FindStringSubmatch(read("Makefile"))
	if m == nil {
		t.Fatal("Makefile: no BUILD_TAGS := line")
	}
	if m[1] != buildTags {
		t.Errorf("Makefile's BUILD_TAGS is %q, test/e2e's buildTags %q: make them agree", m[1], buildTags)
	}
	if !regexp.MustCompile(`(?m)^RUN .*\bmake build\b`).MatchString(read("Dockerfile")) {
		t.Error("Dockerfile: the binary is not built with make build (and so not with the Makefile's BUILD_TAGS and flags)")
	}
	if dist := read("hack/dist.sh"); !strings.Contains(dist, `-tags "${BUILD_TAGS}"`) {
		t.Error(`hack/dist.sh does not build with -tags "${BUILD_TAGS}"`)
	}
}
