package browser_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/browser"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// needChromium skips without Chromium, except under CI, which has it.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(browser.DefaultProgram); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must have %s: %v", browser.DefaultProgram, err)
		}
		t.Skipf("%s is not installed: the browser tests need Debian's chromium", browser.DefaultProgram)
	}
}

// succeeds returns what runs an action on s that must succeed: an error
// or an answer's error fails the test.
func succeeds(t *testing.T, ctx context.Context, s *browser.Session) func(tool.BrowserRequest) *tool.BrowserAnswer {
	return func(req tool.BrowserRequest) *tool.BrowserAnswer {
		t.Helper()
		ans, err := s.Do(ctx, &req)
		if err != nil {
			t.Fatalf("%s: %v", req.Action, err)
		}
		if ans.Error != "" {
			t.Fatalf("%s: %s", req.Action, ans.Error)
		}
		return ans
	}
}

// TestSessionLocalSandbox drives a real Chromium started by the local
// sandbox backend over its DevTools pipe: open, read (text and links),
// type, press, click, back, screenshot, close, and a start again after
// close with the profile's cookie kept.
func TestSessionLocalSandbox(t *testing.T) {
	needChromium(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "seen", Value: "yes", Path: "/", Expires: time.Now().Add(time.Hour)})
		fmt.Fprint(w, `<html><head><title>Home</title></head><body><h1>Welcome</h1><p>Hello from the test site.</p>
<a href="/next">Next page</a><form action="/next"><input id="q" name="q"><button id="go">Go</button></form></body></html>`)
	})
	mux.HandleFunc("/next", func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Cookie("seen")
		cookie := ""
		if c != nil {
			cookie = c.Value
		}
		fmt.Fprintf(w, `<html><head><title>Next</title></head><body><p id="q">q=%s cookie=%s</p></body></html>`, r.URL.Query().Get("q"), cookie)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// A workspace deep enough that a Unix socket under its TMPDIR would be
	// past the kernel's 107 bytes: the browser must not put one there.
	ws := filepath.Join(t.TempDir(), strings.Repeat("a-long-directory-name/", 5))
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	backend, _ := sandbox.Detect(context.Background(), sandbox.DetectOptions{Local: true})
	var last browser.Process
	start := func(ctx context.Context, l *browser.Launch) (browser.Process, error) {
		p, err := backend.Start(ctx, sandbox.Spec{Workspace: ws}, &sandbox.StartRequest{Command: l.Command, Env: l.Env, UnboundedAddressSpace: true, MemoryBytes: l.MemoryBytes})
		if err == nil {
			last = p
		}
		return p, err
	}
	var kept []byte
	s := browser.New(start, &browser.Config{
		SaveState: func(_ context.Context, data []byte) error { kept = data; return nil },
		LoadState: func(context.Context) ([]byte, error) { return kept, nil },
	})
	defer s.Close()
	ctx := context.Background()
	do := succeeds(t, ctx, s)
	ans := do(tool.BrowserRequest{Action: tool.BrowserOpen, URL: srv.URL + "/"})
	if ans.Title != "Home" {
		t.Fatalf("title after open = %q, want Home", ans.Title)
	}
	ans = do(tool.BrowserRequest{Action: tool.BrowserRead})
	if !strings.Contains(ans.Text, "Hello from the test site.") || len(ans.Links) != 1 || ans.Links[0].Href != srv.URL+"/next" {
		t.Fatalf("read = %q, links %+v", ans.Text, ans.Links)
	}
	do(tool.BrowserRequest{Action: tool.BrowserType, Selector: "#q", Text: "cats"})
	do(tool.BrowserRequest{Action: tool.BrowserPress, Key: "Enter"})
	ans = do(tool.BrowserRequest{Action: tool.BrowserRead, Selector: "#q"})
	if ans.Text != "q=cats cookie=yes" {
		t.Fatalf("after submitting the form, read #q = %q", ans.Text)
	}
	do(tool.BrowserRequest{Action: tool.BrowserBack})
	do(tool.BrowserRequest{Action: tool.BrowserClick, Selector: "a"})
	ans = do(tool.BrowserRequest{Action: tool.BrowserScreenshot})
	if len(ans.PNG) < 8 || string(ans.PNG[1:4]) != "PNG" {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(ans.PNG))
	}
	if bad, _ := s.Do(ctx, &tool.BrowserRequest{Action: tool.BrowserClick, Selector: "#nothing-here"}); bad == nil {
		t.Fatal("a click on a missing element gave no answer")
	}
	do(tool.BrowserRequest{Action: tool.BrowserClose})
	if _, err := os.Stat(ws + "/.browser/profile"); err != nil {
		t.Fatalf("the profile is not in the workspace: %v", err)
	}
	// A new browser on the same profile still has the cookie.
	do(tool.BrowserRequest{Action: tool.BrowserOpen, URL: srv.URL + "/next"})
	ans = do(tool.BrowserRequest{Action: tool.BrowserRead})
	if !strings.Contains(ans.Text, "cookie=yes") {
		t.Fatalf("after a restart, the page reads %q: the cookie was lost", ans.Text)
	}

	// Killed (as with a server killed with SIGKILL), and its profile's
	// cookie store gone with whatever it had not written: the next action
	// starts a browser that has the cookie SaveState kept.
	if !strings.Contains(string(kept), `"seen"`) {
		t.Fatalf("SaveState was not given the cookie: %s", kept)
	}
	last.Kill()
	<-last.Done()
	if err := os.RemoveAll(ws + "/.browser/profile/Default/Cookies"); err != nil {
		t.Fatal(err)
	}
	// It is back on the page it was on, with the cookie.
	ans = do(tool.BrowserRequest{Action: tool.BrowserClick, Selector: "#q"})
	ans = do(tool.BrowserRequest{Action: tool.BrowserRead})
	if !strings.Contains(ans.Text, "cookie=yes") {
		t.Fatalf("after a kill, the page reads %q (at %s): the page or the cookie was lost", ans.Text, ans.URL)
	}
}
