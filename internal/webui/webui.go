package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"
)

//go:embed static
var staticFiles embed.FS

// ContentSecurityPolicy is sent with every response of the UI. The page
// needs nothing from another origin and runs no inline code; blob: images
// are artifact previews fetched with the API key and shown from memory.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' blob:; connect-src 'self'; manifest-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// AssetPrefix is where the UI's assets are served: AssetPrefix + version +
// "/" + the file's path under static/.
const AssetPrefix = "/ui/"

// indexName is the page's template under static/; every other file is an
// asset. Its BasePlaceholder is replaced with the versioned asset base.
const (
	indexName       = "index.html"
	BasePlaceholder = "{{BASE}}"
)

// asset is one file ready to serve.
type asset struct {
	body        []byte
	etag        string
	contentType string
}

// Handler serves the UI. It is safe for concurrent use; the zero value is
// not usable: call New.
type Handler struct {
	version string
	index   asset
	assets  map[string]asset // by path under static/, e.g. "js/main.js"
}

// New returns a Handler for the embedded files. It panics if they are not
// what the package was built with (no index.html, or a file of an unknown
// type): that is a mistake in this package, found by its tests.
func New() *Handler {
	h, err := newHandler(staticFiles)
	if err != nil {
		panic("webui: " + err.Error())
	}
	return h
}

// newHandler builds a Handler from the files under static/ of files.
func newHandler(files fs.FS) (*Handler, error) {
	root, err := fs.Sub(files, "static")
	if err != nil {
		return nil, fmt.Errorf("open static: %w", err)
	}
	var names []string
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list static: %w", err)
	}
	sort.Strings(names)

	h := &Handler{assets: make(map[string]asset, len(names))}
	var indexTmpl []byte
	all := sha256.New()
	for _, name := range names {
		body, err := fs.ReadFile(root, name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if name == indexName {
			indexTmpl = body
			continue
		}
		ctype, ok := contentTypes[path.Ext(name)]
		if !ok {
			return nil, fmt.Errorf("%s: no content type for %q files", name, path.Ext(name))
		}
		// The name and the body, each with its length, so that no two
		// different trees hash alike.
		fmt.Fprintf(all, "%d:%s%d:", len(name), name, len(body))
		all.Write(body)
		h.assets[name] = asset{body: body, etag: etagOf(body), contentType: ctype}
	}
	if indexTmpl == nil {
		return nil, fmt.Errorf("static/%s is missing", indexName)
	}
	if !bytes.Contains(indexTmpl, []byte(BasePlaceholder)) {
		return nil, fmt.Errorf("static/%s does not use %s", indexName, BasePlaceholder)
	}
	h.version = hex.EncodeToString(all.Sum(nil))[:16]
	page := bytes.ReplaceAll(indexTmpl, []byte(BasePlaceholder), []byte(AssetPrefix+h.version))
	h.index = asset{body: page, etag: etagOf(page), contentType: "text/html; charset=utf-8"}
	return h, nil
}

// contentTypes are the types of the files the UI ships; a file of another
// type fails New, so nothing is served with a sniffed type.
var contentTypes = map[string]string{
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
}

func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// Version is the asset version of this build (16 hex digits).
func (h *Handler) Version() string { return h.version }

// ServeHTTP serves the page at "/" and the assets under AssetPrefix, for GET
// and HEAD; anything else is a 404 (the router sends only those paths).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	hdr.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/" {
		// Revalidated on every load: a new binary's page names its new
		// asset version at once.
		h.serve(w, r, h.index, "no-cache")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, AssetPrefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	version, name, ok := strings.Cut(rest, "/")
	a, found := h.assets[name]
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	cache := "public, max-age=31536000, immutable"
	if version != h.version {
		// A page of another build asks for its assets: serve this build's,
		// but never let them be cached under the other version's URL.
		cache = "no-cache"
	}
	h.serve(w, r, a, cache)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, a asset, cache string) {
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", cache)
	hdr.Set("ETag", a.etag)
	// ServeContent answers If-None-Match with a 304 (and ranges); a zero
	// modification time leaves Last-Modified out, so the ETag decides.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
