package browser_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/browser"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// needBwrap returns the bwrap backend; it skips without bubblewrap, except
// under CI, which has it.
func needBwrap(t *testing.T) sandbox.Backend {
	t.Helper()
	b, err := sandbox.NewBwrap(sandbox.BwrapOptions{})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must have a working bubblewrap: %v", err)
		}
		t.Skipf("no bubblewrap here: %v", err)
	}
	return b
}

// proxySocket serves a plain HTTP forward proxy on a Unix socket, the
// session's egress proxy as the sandbox's forwarder reaches it.
func proxySocket(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL = r.In.URL // absolute: a proxy's request names its target
			r.Out.Host = r.In.Host
		},
		// Chromium's own background requests (CONNECT) are not served.
		ErrorLog: log.New(io.Discard, "", 0),
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

// mainBrowserPid returns the pid of the main Chromium process started by
// this test binary: a descendant of it whose command line has
// --remote-debugging-pipe and no --type= (Chromium's children have one).
// Other tests' browsers (other binaries) are not descendants.
func mainBrowserPid() (int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	self := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if !strings.HasSuffix(args[0], "chromium") || !strings.Contains(string(cmd), "--remote-debugging-pipe") || strings.Contains(string(cmd), "--type=") {
			continue
		}
		if descends(pid, self) {
			return pid, nil
		}
	}
	return 0, errors.New("no main browser process of this test is running")
}

// killMainBrowser kills the main Chromium process alone with SIGKILL, its
// children left running, and returns its pid.
func killMainBrowser() (int, error) {
	pid, err := mainBrowserPid()
	if err != nil {
		return 0, err
	}
	return pid, syscall.Kill(pid, syscall.SIGKILL)
}

// descends reports whether pid has ancestor among its parents.
func descends(pid, ancestor int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 2 {
			return false
		}
		pid, _ = strconv.Atoi(f[1])
		if pid == ancestor {
			return true
		}
	}
	return false
}

// TestSessionMainProcessKilled: in bubblewrap, as a server runs it, the
// main Chromium process alone is killed with SIGKILL (a crash, the OOM
// killer) while its children live, once between actions and once during
// one. The action timeout is ten minutes, so a browser that waited for it
// would make the test time out: the action the kill hits, or the next one,
// fails at once saying the browser stopped (or runs in a browser started
// again), and the following one runs in a browser started again, on its
// page, with the cookie the killed one had.
func TestSessionMainProcessKilled(t *testing.T) {
	needChromium(t)
	backend := needBwrap(t)
	killed := make(chan error, 1)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			http.SetCookie(w, &http.Cookie{Name: "seen", Value: "yes", Path: "/", Expires: time.Now().Add(time.Hour)})
		case "/crash":
			// The browser dies while it waits for this page.
			_, err := killMainBrowser()
			killed <- err
			<-r.Context().Done()
			return
		}
		c, _ := r.Cookie("seen")
		cookie := ""
		if c != nil {
			cookie = c.Value
		}
		fmt.Fprintf(w, `<html><head><title>Page</title></head><body><p id="c">cookie=%s</p></body></html>`, cookie)
	}))
	defer site.Close()
	sock := proxySocket(t)
	ws := t.TempDir()
	start := func(ctx context.Context, l *browser.Launch) (browser.Process, error) {
		return backend.Start(ctx, sandbox.Spec{Workspace: ws, ProxySocket: sock}, &sandbox.StartRequest{Command: l.Command, Env: l.Env, UnboundedAddressSpace: true, MemoryBytes: l.MemoryBytes})
	}
	var kept []byte
	s := browser.New(start, &browser.Config{
		Proxy:         sandbox.ProxyListen,
		ActionTimeout: 10 * time.Minute,
		SaveState:     func(_ context.Context, data []byte) error { kept = data; return nil },
		LoadState:     func(context.Context) ([]byte, error) { return kept, nil },
	})
	defer s.Close()
	ctx := t.Context()
	do := succeeds(t, ctx, s)
	// stopped runs req on a browser whose main process was just killed: it
	// runs, or fails saying the browser stopped, never with an error of the
	// page.
	stopped := func(req tool.BrowserRequest) {
		t.Helper()
		ans, err := s.Do(ctx, &req)
		switch {
		case err != nil && !strings.Contains(err.Error(), "the browser stopped"):
			t.Fatalf("%s after the kill: %v, want the browser stopped", req.Action, err)
		case err == nil && ans.Error != "":
			t.Fatalf("%s after the kill answered %q, want the browser stopped or an answer", req.Action, ans.Error)
		}
	}
	readCookie := func(when string) {
		t.Helper()
		if ans := do(tool.BrowserRequest{Action: tool.BrowserRead, Selector: "#c"}); ans.Text != "cookie=yes" {
			t.Fatalf("%s, the page reads %q (at %s): the page or the cookie was lost", when, ans.Text, ans.URL)
		}
	}
	do(tool.BrowserRequest{Action: tool.BrowserOpen, URL: site.URL + "/"})
	do(tool.BrowserRequest{Action: tool.BrowserOpen, URL: site.URL + "/next"})
	readCookie("before the kill")

	// Between two actions: the next one is a click, whose element is not
	// there in a dead browser (not "no element matches").
	first, err := killMainBrowser()
	if err != nil {
		t.Fatal(err)
	}
	stopped(tool.BrowserRequest{Action: tool.BrowserClick, Selector: "#c"})
	readCookie("after a kill between actions")
	again, err := mainBrowserPid()
	if err != nil || again == first {
		t.Fatalf("the browser was not started again: pid %d (killed %d), %v", again, first, err)
	}

	// During an action: the page it opens never comes, its browser dies.
	stopped(tool.BrowserRequest{Action: tool.BrowserOpen, URL: site.URL + "/crash"})
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	do(tool.BrowserRequest{Action: tool.BrowserOpen, URL: site.URL + "/next"})
	readCookie("after a kill during an action")
}
