package webui

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
)

func get(t *testing.T, h http.Handler, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestPageNamesVersionedAssets(t *testing.T) {
	h := New()
	require.Regexp(t, `^[0-9a-f]{16}$`, h.Version())
	rec := get(t, h, "/", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Equal(t, ContentSecurityPolicy, rec.Header().Get("Content-Security-Policy"))
	require.Equal(t, "DENY", rec.Header().Get("X-Frame-Options"))
	require.Equal(t, "no-cache", rec.Header().Get("Cache-Control"), "the page is revalidated, so a new build's assets are used at once")
	body := rec.Body.String()
	require.NotContains(t, body, BasePlaceholder)
	base := AssetPrefix + h.Version()
	for _, asset := range []string{"/app.css", "/js/main.js", "/icon.svg"} {
		require.Contains(t, body, base+asset)
	}

	etag := rec.Header().Get("ETag")
	require.Regexp(t, `^"[0-9a-f]{64}"$`, etag)
	again := get(t, h, "/", map[string]string{"If-None-Match": etag})
	require.Equal(t, http.StatusNotModified, again.Code)
	require.Empty(t, again.Body.String())
}

func TestAssetsAreImmutableUnderTheirVersion(t *testing.T) {
	h := New()
	types := map[string]string{
		"app.css":           "text/css; charset=utf-8",
		"js/main.js":        "text/javascript; charset=utf-8",
		"js/pages/inbox.js": "text/javascript; charset=utf-8",
		"icon.svg":          "image/svg+xml",
	}
	for name, ctype := range types {
		rec := get(t, h, AssetPrefix+h.Version()+"/"+name, nil)
		require.Equal(t, http.StatusOK, rec.Code, name)
		require.Equal(t, ctype, rec.Header().Get("Content-Type"), name)
		require.Equal(t, "public, max-age=31536000, immutable", rec.Header().Get("Cache-Control"), name)
		require.Equal(t, ContentSecurityPolicy, rec.Header().Get("Content-Security-Policy"), name)
		require.NotZero(t, rec.Body.Len(), name)
		etag := rec.Header().Get("ETag")
		require.Equal(t, http.StatusNotModified, get(t, h, AssetPrefix+h.Version()+"/"+name, map[string]string{"If-None-Match": etag}).Code, name)
	}

	// A page of another build gets this build's file, never cached under
	// the other version's URL.
	other := get(t, h, AssetPrefix+"0000000000000000/app.css", nil)
	require.Equal(t, http.StatusOK, other.Code)
	require.Equal(t, "no-cache", other.Header().Get("Cache-Control"))
}

func TestUnknownPathsAndMethods(t *testing.T) {
	h := New()
	v := h.Version()
	for _, target := range []string{
		AssetPrefix + v + "/nope.js",
		AssetPrefix + v,
		AssetPrefix + v + "/",
		AssetPrefix + v + "/index.html", // the page is served at / only
		AssetPrefix + v + "/../app.css",
		AssetPrefix + "app.css",
		"/favicon.ico",
	} {
		require.Equal(t, http.StatusNotFound, get(t, h, target, nil).Code, target)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}")))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))

	head := httptest.NewRecorder()
	h.ServeHTTP(head, httptest.NewRequest(http.MethodHead, "/", nil))
	require.Equal(t, http.StatusOK, head.Code)
	require.Empty(t, head.Body.String())
}

func TestVersionFollowsEveryByte(t *testing.T) {
	files := func(js string) fstest.MapFS {
		return fstest.MapFS{
			"static/index.html": {Data: []byte(`<script type="module" src="{{BASE}}/a.js"></script>`)},
			"static/a.js":       {Data: []byte(js)},
		}
	}
	a, err := newHandler(files("export const x = 1;"))
	require.NoError(t, err)
	b, err := newHandler(files("export const x = 2;"))
	require.NoError(t, err)
	require.NotEqual(t, a.Version(), b.Version())
	same, err := newHandler(files("export const x = 1;"))
	require.NoError(t, err)
	require.Equal(t, a.Version(), same.Version())
	require.Contains(t, get(t, a, "/", nil).Body.String(), `src="/ui/`+a.Version()+`/a.js"`)
}

func TestBrokenTreesAreRefused(t *testing.T) {
	_, err := newHandler(fstest.MapFS{"static/a.js": {Data: []byte("x")}})
	require.ErrorContains(t, err, "index.html is missing")
	_, err = newHandler(fstest.MapFS{"static/index.html": {Data: []byte("<p>no base</p>")}})
	require.ErrorContains(t, err, "does not use {{BASE}}")
	_, err = newHandler(fstest.MapFS{
		"static/index.html": {Data: []byte("{{BASE}}")},
		"static/font.woff2": {Data: []byte("x")},
	})
	require.ErrorContains(t, err, `no content type for ".woff2" files`)
}

// staticText returns every embedded file's text by its path under static/.
func staticText(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	root, err := fs.Sub(staticFiles, "static")
	require.NoError(t, err)
	require.NoError(t, fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		out[p] = string(b)
		return err
	}))
	return out
}

// Every relative module import names an embedded file: a typo would break
// the page only in a browser, so it is caught here too.
func TestModuleImportsResolve(t *testing.T) {
	files := staticText(t)
	imports := regexp.MustCompile(`(?m)(?:^import\s[^;]*?from\s+|import\()\s*'([^']+)'`)
	n := 0
	for name, text := range files {
		if path.Ext(name) != ".js" {
			continue
		}
		for _, m := range imports.FindAllStringSubmatch(text, -1) {
			spec := m[1]
			require.True(t, strings.HasPrefix(spec, "./") || strings.HasPrefix(spec, "../"),
				"%s imports %q: only files of the UI, by relative path", name, spec)
			target := path.Join(path.Dir(name), spec)
			_, ok := files[target]
			require.True(t, ok, "%s imports %q, which is not embedded (%s)", name, spec, target)
			n++
		}
	}
	require.Greater(t, n, 20, "the import scan found too few imports to be checking anything")
}

// The rules the Content-Security-Policy relies on, checked in the source:
// no HTML parsed from strings, no code built from strings, no inline script
// or style in the page, nothing loaded from another origin.
func TestSourcesKeepTheCSPRules(t *testing.T) {
	forbidden := regexp.MustCompile(`\.innerHTML\s*=|\.outerHTML\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function\(|setTimeout\(\s*['"]`)
	otherOrigin := regexp.MustCompile(`(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^'"\s]*`)
	for name, text := range staticText(t) {
		if m := forbidden.FindString(text); m != "" {
			t.Errorf("%s uses %q", name, m)
		}
		for _, u := range otherOrigin.FindAllString(text, -1) {
			if u != "http://www.w3.org/2000/svg" { // the SVG namespace, never fetched
				t.Errorf("%s refers to another origin: %s", name, u)
			}
		}
	}
	page := staticText(t)[indexName]
	scripts := regexp.MustCompile(`<script([^>]*)>([\s\S]*?)</script>`).FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, scripts)
	for _, m := range scripts {
		require.Contains(t, m[1], ` src="`, "every script is a file")
		require.Empty(t, strings.TrimSpace(m[2]), "no inline script")
	}
	require.NotContains(t, page, "<style")
	require.NotContains(t, page, " style=")
	require.NotRegexp(t, `\son[a-z]+=`, page, "no inline event handlers")
}

// Every control the UI hides by role asks can() for a method of
// app.Permissions (what GET /v1/me lists): a misspelt or renamed one
// would hide a control from every role, or show it to all.
func TestRoleChecksNameServiceMethods(t *testing.T) {
	calls := regexp.MustCompile(`\bcan\(\s*'([^']*)'\s*\)`)
	seen := map[string]bool{}
	for name, text := range staticText(t) {
		for _, m := range calls.FindAllStringSubmatch(text, -1) {
			_, ok := app.Permissions[m[1]]
			require.True(t, ok, "%s asks can(%q), which is no method of app.Permissions", name, m[1])
			seen[m[1]] = true
		}
	}
	for _, method := range []string{"DecideAction", "Cancel", "Steer", "Pause", "Resume", "CreateTurn", "Review", "Fork", "PutFileIfMatch", "DeleteFileIfMatch", "ListSessions"} {
		require.True(t, seen[method], "no control asks can(%q)", method)
	}
}
