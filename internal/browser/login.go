package browser

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// The login action: the server, not the model, fills a vault login
// secret's user name and password into a page's form over the DevTools
// pipe. Where it goes is checked on the page itself, in the same call
// that fills it: the page's address and the form's target must be among
// the secret's hosts, and the form must not send by GET (the password
// would be in the address, the history the profile keeps in the
// workspace, and the server's logs). The password is put only into a
// password field (input type=password), never a visible one.
//
// What comes back never holds a secret's value: every answer of Do (text,
// links, address, title, errors) passes the vault's redactor, and a
// screenshot is refused while the page shows a value (a field revealed,
// text holding it). The typed password does enter the sandbox: Chromium
// runs there, so it is in the browser's memory and the page, as when a
// person types it; only the secret's hosts receive it.

// LoginRefusedError is the refusal of a login the model should read (an
// unknown secret, one the agent does not name, one not bound to the host,
// one that is not a login). Its text names the secret, never a value.
type LoginRefusedError struct{ Reason string }

func (e *LoginRefusedError) Error() string { return e.Reason }

// Do runs one action (tool.BrowserDriver), its answer and its error
// redacted of every secret value the vault holds: a page may show the
// password it was given (or any other secret) anywhere, in its text, its
// address or its title.
func (s *Session) Do(ctx context.Context, req *tool.BrowserRequest) (*tool.BrowserAnswer, error) {
	var red *redact.Redactor
	if s.cfg.Redactor != nil {
		r, err := s.cfg.Redactor(ctx)
		if err != nil {
			// Fail closed: nothing a page shows is returned unredacted.
			return nil, fmt.Errorf("load the secrets to redact: %w", err)
		}
		red = r
	}
	ans, err := s.do(ctx, req, red)
	if err != nil {
		if red.Contains(err.Error()) {
			return nil, errors.New(red.String(err.Error()))
		}
		return nil, err
	}
	redactAnswer(red, ans)
	return ans, nil
}

func redactAnswer(red *redact.Redactor, ans *tool.BrowserAnswer) {
	if red.Empty() {
		return
	}
	ans.URL, ans.Title, ans.Text, ans.Error = red.String(ans.URL), red.String(ans.Title), red.String(ans.Text), red.String(ans.Error)
	for i := range ans.Links {
		ans.Links[i].Text, ans.Links[i].Href = red.String(ans.Links[i].Text), red.String(ans.Links[i].Href)
	}
}

// loginScript finds a login form's fields (its arguments: the password,
// user name and submit selectors, "" for the defaults) and, when fill
// holds the values and the origin the page must still have, fills and
// sends it. It returns what it found, never a field's value.
const loginScript = `function(passSel, userSel, submitSel, fill) {
  const doc = this;
  const pass = doc.querySelector(passSel || 'input[type=password]');
  if (!pass) return {error: 'no password field matches ' + (passSel || 'input[type=password]')};
  if (pass.tagName !== 'INPUT' || pass.type !== 'password') return {error: 'password_selector must match a password field (input type=password), not a visible one'};
  const form = pass.form;
  let user = null;
  if (userSel) {
    user = doc.querySelector(userSel);
    if (!user) return {error: 'no user name field matches ' + userSel};
  } else {
    const inputs = Array.from((form || doc).querySelectorAll('input'));
    for (const el of inputs) {
      if (el === pass) break;
      if (['text', 'email', ''].includes(el.getAttribute('type') || '') || el.type === 'text' || el.type === 'email') user = el;
    }
  }
  if (user && (user.tagName !== 'INPUT' || user.type === 'password' || user.type === 'hidden')) return {error: 'username_selector must match a text or email field'};
  let submit = null;
  if (submitSel) {
    submit = doc.querySelector(submitSel);
    if (!submit) return {error: 'no submit button matches ' + submitSel};
  } else if (form) {
    submit = form.querySelector('[type=submit], button:not([type])');
  } else {
    return {error: 'the password field is in no form: give submit_selector'};
  }
  const target = submit && submit.form ? submit.form : form;
  const info = {
    origin: doc.location.origin, href: doc.location.href, user: !!user,
    action: target ? target.action : '', method: target ? (submit && submit.formMethod ? submit.formMethod : target.method) : '',
  };
  if (submit && submit.formAction && submit.hasAttribute('formaction')) info.action = submit.formAction;
  if (!fill) return info;
  if (doc.location.origin !== fill.origin) return {error: 'the page moved to ' + doc.location.origin + ' before the form was filled'};
  const put = (el, v) => {
    el.focus();
    el.value = v;
    el.dispatchEvent(new Event('input', {bubbles: true}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
  };
  if (user) put(user, fill.username);
  put(pass, fill.password);
  if (submit) submit.click(); else form.requestSubmit();
  return info;
}`

type loginInfo struct {
	Error  string `json:"error"`
	Origin string `json:"origin"`
	Href   string `json:"href"`
	User   bool   `json:"user"`
	Action string `json:"action"`
	Method string `json:"method"`
}

type loginFill struct {
	Origin   string `json:"origin"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// login opens req.URL and signs in with the secret it names. A refusal is
// ans.Error; an error is the browser's failure. s.mu is held.
func (s *Session) login(ctx, c context.Context, req *tool.BrowserRequest, ans *tool.BrowserAnswer) error {
	l := req.Login
	if s.cfg.Login == nil {
		ans.Error = "login: this session has no vault to sign in from"
		return nil
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		return err // checked by the tool already
	}
	sec, err := s.cfg.Login(ctx, l.Secret, tool.LoginDest(u))
	var refused *LoginRefusedError
	if errors.As(err, &refused) {
		ans.Error = "login: " + refused.Reason
		return nil
	}
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if err := chromedp.Do(c, chromedp.Navigate(req.URL)); err != nil {
		return err
	}
	passSel := l.PasswordSelector
	if passSel == "" {
		passSel = "input[type=password]"
	}
	if !s.present(c, passSel) {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		ans.Error = fmt.Sprintf("login: no password field matches %q on the page", passSel)
		return nil
	}
	info, err := s.loginCall(c, l, nil)
	if err != nil {
		return err
	}
	if reason := checkLoginTarget(sec, info); reason != "" {
		ans.Error = "login: " + reason
		return nil
	}
	before, _ := chromedp.Run(c, chromedp.Evaluate[float64]("performance.timeOrigin"))
	info, err = s.loginCall(c, l, &loginFill{Origin: info.Origin, Username: sec.Username, Password: sec.Password})
	if err != nil {
		return err
	}
	if info.Error != "" {
		ans.Error = "login: " + info.Error
		return nil
	}
	s.awaitNavigation(c, before)
	return nil
}

// checkLoginTarget says why the form found must not get the secret ("":
// it may): the page and the form's target must be among its hosts, and
// the form must send by POST.
func checkLoginTarget(sec *tool.LoginSecret, info *loginInfo) string {
	if info.Error != "" {
		return info.Error
	}
	page, err := url.Parse(info.Href)
	if err != nil || (page.Scheme != "http" && page.Scheme != "https") {
		return "the page is not an http or https page"
	}
	if dest := tool.LoginDest(page); !sec.Bound(dest) {
		return fmt.Sprintf("the page is at %s, and secret %s is not bound to it", dest, sec.Name)
	}
	if info.Action != "" {
		a, err := url.Parse(info.Action)
		if err != nil || (a.Scheme != "http" && a.Scheme != "https") {
			return "the form sends to something that is not an http or https address"
		}
		if dest := tool.LoginDest(a); !sec.Bound(dest) {
			return fmt.Sprintf("the form sends to %s, and secret %s is not bound to it", dest, sec.Name)
		}
	}
	if strings.EqualFold(info.Method, "get") {
		return "the form sends by GET: the password would be in the address (and so in the browser's history, kept in the workspace); only a form sent by POST is filled"
	}
	return ""
}

// loginCall runs loginScript on the document the browser shows: bound to
// that document, so a page replaced meanwhile fails the call rather than
// receiving the values.
func (s *Session) loginCall(c context.Context, l *tool.BrowserLoginRequest, fill *loginFill) (*loginInfo, error) {
	doc, err := chromedp.Run(c, chromedp.Evaluate[*runtime.RemoteObject]("document"))
	if err != nil {
		return nil, err
	}
	var arg any
	if fill != nil {
		arg = fill
	}
	info, err := chromedp.Run(c, chromedp.CallFunctionOn[loginInfo](loginScript, func(p *runtime.CallFunctionOnParams) {
		p.ObjectID = doc.ObjectID
	}, l.PasswordSelector, l.UsernameSelector, l.SubmitSelector, arg))
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// awaitNavigation waits, up to elementWait, for the page sent to load
// (another document than the one of before, fully loaded); a login that
// does not leave the page (a script's) ends when the wait does.
func (s *Session) awaitNavigation(c context.Context, before float64) {
	deadline := time.Now().Add(elementWait)
	for time.Now().Before(deadline) {
		type state struct {
			Origin float64 `json:"origin"`
			Ready  string  `json:"ready"`
		}
		st, err := chromedp.Run(c, chromedp.Evaluate[state]("({origin: performance.timeOrigin, ready: document.readyState})"))
		if err == nil && st.Origin != before && st.Ready == "complete" {
			return
		}
		select {
		case <-c.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// shownScript returns what the page shows as text: its text, its
// address, its title, and the values of the fields that show theirs (a
// password field shows its value only when its style reveals it).
const shownScript = `(function() {
  const out = [document.body ? document.body.innerText : '', location.href, document.title];
  for (const el of document.querySelectorAll('input, textarea, select')) {
    if (el.type === 'password' && getComputedStyle(el).webkitTextSecurity !== 'none') continue;
    out.push(String(el.value));
  }
  return out;
})()`

// screenshotRefusal says why the page may not be captured ("": it may):
// it shows a secret's value, which a picture would carry past the
// redactor. A page that cannot be checked is not captured.
func screenshotRefusal(c context.Context, red *redact.Redactor) string {
	if red.Empty() {
		return ""
	}
	shown, err := chromedp.Run(c, chromedp.Evaluate[[]string](shownScript))
	if err != nil {
		return "screenshot: the page could not be checked for secret values, so it is not captured"
	}
	for _, text := range shown {
		if red.Contains(text) {
			return "screenshot: refused: the page shows the value of a vault secret (a revealed password field, or text holding it); read the page instead, which redacts it"
		}
	}
	return ""
}
