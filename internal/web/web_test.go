package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestServe: the page at / and its assets at /ui/, each with the strict
// headers; anything else is not found; a cached copy is revalidated.
func TestServe(t *testing.T) {
	t.Parallel()
	h := New()
	for path, want := range map[string]string{"/": "text/html", "/ui/app.js": "text/javascript", "/ui/app.css": "text/css"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), want) {
			t.Errorf("GET %s: %d %q", path, rec.Code, rec.Header().Get("Content-Type"))
		}
		for k, v := range map[string]string{"Content-Security-Policy": CSP, "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"} {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, v)
			}
		}
		etag := rec.Header().Get("ETag")
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("If-None-Match", etag)
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if etag == "" || rec.Code != http.StatusNotModified {
			t.Errorf("GET %s again with its ETag %q: %d, want 304", path, etag, rec.Code)
		}
	}
	for _, path := range []string{"/ui/index.html", "/ui/missing.js", "/ui/../web.go", "/ui/", "/other"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, rec.Code)
		}
	}
	if !strings.Contains(CSP, "script-src 'self'") || strings.Contains(CSP, "unsafe") {
		t.Errorf("CSP %q", CSP)
	}
	if h.Size() == 0 {
		t.Error("no assets embedded")
	}
}

// TestNoInlineCode: the page has no inline script, style or event
// handler, which the CSP would block; the script never parses text as
// HTML.
func TestNoInlineCode(t *testing.T) {
	t.Parallel()
	h := New()
	page := string(h.files["index.html"].body)
	for _, bad := range []string{"<script>", "<style", " style=", " onclick=", " onload="} {
		if strings.Contains(page, bad) {
			t.Errorf("index.html holds %q", bad)
		}
	}
	js := string(h.files["app.js"].body)
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(js, bad) {
			t.Errorf("app.js uses %s", bad)
		}
	}
}
