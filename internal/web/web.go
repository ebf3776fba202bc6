// Package web is drover's web UI: a page and its script and style sheet,
// embedded in the binary and served by the API server at / (no CDN, no
// network at run time, no front-end build: plain HTML, CSS and JavaScript
// modules, written by hand; see docs/architecture.md). The page calls the
// same /v1 API as the CLI, with the browser's session cookie.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// CSP is the page's Content-Security-Policy: its own script, style,
// images and API, nothing inline, no frames, forms only to itself.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// file is one asset with its validator.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the UI: GET / (the page, for every route of the page's
// own, which lives in the URL's fragment) and GET /ui/NAME (its assets).
type Handler struct {
	files   map[string]file
	started time.Time
}

// New reads the embedded assets.
func New() *Handler {
	h := &Handler{files: map[string]file{}, started: time.Now()}
	_ = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		h.files[strings.TrimPrefix(p, "assets/")] = file{body: body, contentType: contentType(p), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	return h
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// Size is the bytes of the embedded assets.
func (h *Handler) Size() int {
	n := 0
	for _, f := range h.files {
		n += len(f.body)
	}
	return n
}

// ServeHTTP serves the page and its assets with strict headers: the CSP,
// no framing (clickjacking), no MIME sniffing, no referrer.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := "index.html"
	if r.URL.Path != "/" {
		name = strings.TrimPrefix(r.URL.Path, "/ui/")
	}
	f, ok := h.files[name]
	if !ok || name == "index.html" && r.URL.Path != "/" || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Content-Type", f.contentType)
	hd.Set("ETag", f.etag)
	hd.Set("Cache-Control", "no-cache") // revalidated by ETag: a new binary's assets are seen at once
	http.ServeContent(w, r, "", h.started, bytes.NewReader(f.body))
}
