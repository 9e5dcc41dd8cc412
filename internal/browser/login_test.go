package browser_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/browser"
	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// loginPassword is the test's secret value: it must never come back.
const loginPassword = "hunter2-login-canary-91f3"

// loginSite is a small site with a login form (POST, sets a session
// cookie) and the pages an attacker would like: one that copies the
// password into its text and its address, one that reveals the field, a
// form that sends to another host, and one that sends by GET.
func loginSite(t *testing.T, otherHost string) *httptest.Server {
	t.Helper()
	form := func(action, method, extra string) string {
		return fmt.Sprintf(`<html><head><title>Sign in</title></head><body><form action=%q method=%q>
<input name="user" type="email"><input id="pw" name="pw" type="password"><button>Sign in</button></form>%s</body></html>`, action, method, extra)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, form("/session", "post", ""))
	})
	mux.HandleFunc("/session", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.FormValue("user") != "alice@example.com" || r.FormValue("pw") != loginPassword {
			http.Error(w, "bad login", http.StatusForbidden)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "logged-in-7c1", Path: "/"})
		http.Redirect(w, r, "/account", http.StatusSeeOther)
	})
	mux.HandleFunc("/account", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("sid")
		if err != nil || c.Value != "logged-in-7c1" {
			fmt.Fprint(w, `<html><head><title>Sign in</title></head><body><p id="who">nobody</p></body></html>`)
			return
		}
		fmt.Fprint(w, `<html><head><title>Account</title></head><body><p id="who">signed in as alice@example.com</p></body></html>`)
	})
	// A page whose script copies the password, as it is typed, into its
	// text, its title and its address, then reveals the field.
	mux.HandleFunc("/leaky", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, form("/nowhere", "post", `<p id="echo"></p><script>
document.querySelector('form').addEventListener('submit', e => {
  e.preventDefault();
  const v = document.getElementById('pw').value;
  document.getElementById('echo').textContent = 'your password is ' + v;
  document.title = 'pw ' + v;
  history.replaceState(null, '', '/leaky#' + v);
});</script>`))
	})
	mux.HandleFunc("/reveal", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, form("/nowhere", "post", `<script>
document.querySelector('form').addEventListener('submit', e => { e.preventDefault(); document.getElementById('pw').type = 'text'; });
</script>`))
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, form("http://"+otherHost+"/collect", "post", ""))
	})
	mux.HandleFunc("/get", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, form("/session", "get", ""))
	})
	mux.HandleFunc("/visible", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><body><form method="post" action="/session"><input id="shown" name="pw"><button>Go</button></form></body></html>`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestLogin: the login action fills a secret's user name and password
// into a site's form over the protocol, and the site signs the browser in
// (its cookie set, the next page readable). Nothing the browser answers
// afterwards carries the password, whatever the page does with it: copy it
// into its text, its title or its address (redacted), reveal the field
// (the screenshot is refused). A form that sends to another host, by GET,
// or a "password" field that shows what is typed gets nothing, and a
// refusal of the vault is the model's error, without the value.
func TestLogin(t *testing.T) {
	needChromium(t)
	srv := loginSite(t, "127.0.0.2:9")
	ws := t.TempDir()
	backend, _ := sandbox.Detect(context.Background(), sandbox.DetectOptions{Local: true})
	var kept []byte
	red := redact.New(map[string]string{"SHOP_LOGIN": loginPassword})
	site, _ := url.Parse(srv.URL)
	bound := tool.LoginDest(site)
	var asked []string
	s := browser.New(func(ctx context.Context, l *browser.Launch) (browser.Process, error) {
		return backend.Start(ctx, sandbox.Spec{Workspace: ws}, &sandbox.StartRequest{Command: l.Command, Env: l.Env, UnboundedAddressSpace: true, MemoryBytes: l.MemoryBytes})
	}, &browser.Config{
		SaveState: func(_ context.Context, data []byte) error { kept = data; return nil },
		LoadState: func(context.Context) ([]byte, error) { return kept, nil },
		Login: func(_ context.Context, name, dest string) (*tool.LoginSecret, error) {
			asked = append(asked, name+"@"+dest)
			switch {
			case name != "SHOP_LOGIN":
				return nil, &browser.LoginRefusedError{Reason: "secret " + name + " does not exist"}
			case dest != bound:
				return nil, &browser.LoginRefusedError{Reason: "secret " + name + " is not bound to " + dest}
			}
			return &tool.LoginSecret{Name: name, Username: "alice@example.com", Password: loginPassword, Bound: func(d string) bool { return d == bound }}, nil
		},
		Redactor: func(context.Context) (*redact.Redactor, error) { return red, nil },
	})
	defer s.Close()
	ctx := context.Background()
	var answers []string
	do := func(req tool.BrowserRequest) *tool.BrowserAnswer {
		t.Helper()
		ans, err := s.Do(ctx, &req)
		if err != nil {
			t.Fatalf("%s: %v", req.Action, err)
		}
		answers = append(answers, fmt.Sprintf("%+v", *ans))
		return ans
	}
	login := func(path string, l tool.BrowserLoginRequest) *tool.BrowserAnswer {
		t.Helper()
		return do(tool.BrowserRequest{Action: tool.BrowserLogin, URL: srv.URL + path, Login: &l})
	}
	wantRefused := func(ans *tool.BrowserAnswer, want string) {
		t.Helper()
		if !strings.Contains(ans.Error, want) {
			t.Fatalf("error = %q, want one saying %q", ans.Error, want)
		}
	}

	ans := login("/login", tool.BrowserLoginRequest{Secret: "SHOP_LOGIN"})
	if ans.Error != "" || ans.Title != "Account" || ans.URL != srv.URL+"/account" {
		t.Fatalf("login answered %+v, want the account page", ans)
	}
	ans = do(tool.BrowserRequest{Action: tool.BrowserRead, Selector: "#who"})
	if ans.Text != "signed in as alice@example.com" {
		t.Fatalf("after the login the page reads %q", ans.Text)
	}
	if !strings.Contains(string(kept), "logged-in-7c1") {
		t.Fatalf("the session's cookie was not kept: %s", kept)
	}

	// The page copies the password into its text, title and address.
	ans = login("/leaky", tool.BrowserLoginRequest{Secret: "SHOP_LOGIN"})
	ans = do(tool.BrowserRequest{Action: tool.BrowserRead})
	if !strings.Contains(ans.Text, "your password is [REDACTED:SHOP_LOGIN]") || !strings.Contains(ans.Title, "[REDACTED:SHOP_LOGIN]") || !strings.Contains(ans.URL, "[REDACTED:SHOP_LOGIN]") {
		t.Fatalf("the page's copy of the password was not redacted: %+v", ans)
	}
	wantRefused(do(tool.BrowserRequest{Action: tool.BrowserScreenshot}), "shows the value of a vault secret")
	// The page reveals the field: no picture of it.
	login("/reveal", tool.BrowserLoginRequest{Secret: "SHOP_LOGIN"})
	wantRefused(do(tool.BrowserRequest{Action: tool.BrowserScreenshot}), "shows the value of a vault secret")
	// The field is read back through its element: innerText has no value,
	// and the value would be redacted.
	ans = do(tool.BrowserRequest{Action: tool.BrowserRead, Selector: "#pw"})
	if strings.Contains(ans.Text, loginPassword) {
		t.Fatal("read gave the field's value")
	}

	wantRefused(login("/elsewhere", tool.BrowserLoginRequest{Secret: "SHOP_LOGIN"}), "the form sends to 127.0.0.2:9, and secret SHOP_LOGIN is not bound to it")
	wantRefused(login("/get", tool.BrowserLoginRequest{Secret: "SHOP_LOGIN"}), "the form sends by GET")
	wantRefused(login("/visible", tool.BrowserLoginRequest{Secret: "SHOP_LOGIN", PasswordSelector: "#shown"}), "must match a password field")
	wantRefused(login("/login", tool.BrowserLoginRequest{Secret: "OTHER"}), "secret OTHER does not exist")
	wantRefused(login("/login", tool.BrowserLoginRequest{Secret: "SHOP_LOGIN", SubmitSelector: "#nothing"}), "no submit button matches #nothing")

	for _, a := range append(answers, string(kept)) {
		if strings.Contains(a, loginPassword) {
			t.Fatalf("an answer carries the password: %s", a)
		}
	}
	// Nor does the profile in the workspace (its history, its session
	// files), which the agent can read.
	do(tool.BrowserRequest{Action: tool.BrowserClose})
	var holding []string
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil // a socket or a file gone meanwhile
		}
		if strings.Contains(string(data), loginPassword) {
			holding = append(holding, p)
		}
		return nil
	})
	if err != nil || len(holding) > 0 {
		t.Errorf("the workspace holds the password in %v (%v)", holding, err)
	}
	if len(asked) == 0 || asked[0] != "SHOP_LOGIN@"+bound {
		t.Fatalf("the vault was asked %v", asked)
	}
}
