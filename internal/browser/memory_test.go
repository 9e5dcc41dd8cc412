package browser_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/browser"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// TestBrowserMemoryBound: a page that allocates far past the browser's
// memory bound (array buffers, which V8's heap limit does not count) is
// stopped by the kernel in the browser's memory cgroup: the action fails
// with an error the model reads, this process (the server) lives, and the
// next action works.
func TestBrowserMemoryBound(t *testing.T) {
	needChromium(t)
	if ok, why := sandbox.MemoryBound(); !ok {
		t.Skipf("no memory cgroup here (%s): the browser has only V8's heap limit", why)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hog", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body><p id="n">0</p><script>
const kept = [];
for (let i = 0; i < 400; i++) { const b = new Uint8Array(8 << 20); b.fill(1); kept.push(b); document.getElementById('n').textContent = String(i); }
</script></body></html>`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><title>Fine</title></head><body>still here</body></html>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ws := t.TempDir()
	backend, _ := sandbox.Detect(context.Background(), sandbox.DetectOptions{Local: true})
	s := browser.New(func(ctx context.Context, l *browser.Launch) (browser.Process, error) {
		return backend.Start(ctx, sandbox.Spec{Workspace: ws}, &sandbox.StartRequest{Command: l.Command, Env: l.Env, UnboundedAddressSpace: true, MemoryBytes: l.MemoryBytes})
	}, &browser.Config{MemoryBytes: 768 << 20, ActionTimeout: 15 * time.Second})
	defer s.Close()
	ctx := context.Background()

	ans, err := s.Do(ctx, &tool.BrowserRequest{Action: tool.BrowserOpen, URL: srv.URL + "/hog"})
	failed := err != nil || ans.Error != ""
	if !failed {
		// The page may have loaded before its renderer was killed: the
		// next look at it fails.
		ans, err = s.Do(ctx, &tool.BrowserRequest{Action: tool.BrowserRead})
		failed = err != nil || ans.Error != ""
	}
	if !failed {
		t.Fatalf("a page that allocates 3 GiB in a browser bounded to 768 MiB read %q", ans.Text)
	}
	msg := fmt.Sprint(err)
	if ans != nil {
		msg = ans.Error
	}
	if !strings.Contains(msg, "memory limit of 768 MiB") {
		t.Errorf("the failure does not say the memory limit stopped it: %s", msg)
	}
	ans, err = s.Do(ctx, &tool.BrowserRequest{Action: tool.BrowserOpen, URL: srv.URL + "/"})
	if err != nil || ans.Error != "" || ans.Title != "Fine" {
		t.Fatalf("after the memory bound stopped a page, open answered %+v, %v", ans, err)
	}
}
