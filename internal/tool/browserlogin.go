package tool

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
)

// BrowserLogin is the browser's login action: the server fills a vault
// secret's user name and password into a page's login form through the
// DevTools protocol; the model names the secret, never sees its value.
const BrowserLogin = "login"

// LoginSecret is a vault login secret (inject {"login": …}) handed to the
// browser to fill a form. Its values stay in the server and the browser:
// no answer of the browser tool carries them (String hides them).
type LoginSecret struct {
	Name     string
	Username string
	Password string
	// Bound reports whether the secret may go to dest, a host and port
	// ("example.com:443"): one of its hosts.
	Bound func(dest string) bool
}

// String keeps the values out of anything that prints a login.
func (l *LoginSecret) String() string { return fmt.Sprintf("login secret %s", l.Name) }

// GoString hides the values from %#v too.
func (l *LoginSecret) GoString() string { return l.String() }

// LoginDest is the destination a secret's hosts are matched against for
// the page at u: its host and port, the scheme's default port made
// explicit, as http_request matches them.
func LoginDest(u *url.URL) string {
	return net.JoinHostPort(normalizeHost(u.Hostname()), strconv.Itoa(urlPort(u)))
}

// browserLoginSchema is the login action's fields of the browser's schema.
const browserLoginSchema = `"secret":{"type":"string","minLength":1,"description":"login: the NAME of the vault secret to sign in with (bound to the site's host)"},` +
	`"username_selector":{"type":"string","minLength":1,"description":"login: optional, the user name field (default: the text or email field before the first password field)"},` +
	`"password_selector":{"type":"string","minLength":1,"description":"login: optional, the password field (default: the first password field)"},` +
	`"submit_selector":{"type":"string","minLength":1,"description":"login: optional, the button that sends the form (default: the form's submit button)"}`

// browserLoginArgs are the login action's arguments.
type browserLoginArgs struct {
	Secret           *string `json:"secret"`
	UsernameSelector *string `json:"username_selector"`
	PasswordSelector *string `json:"password_selector"`
	SubmitSelector   *string `json:"submit_selector"`
}

// check puts the login's arguments into req, naming a missing one or one
// given to another action.
func (a *browserLoginArgs) check(req *BrowserRequest) error {
	fields := []struct {
		name string
		v    *string
	}{{"secret", a.Secret}, {"username_selector", a.UsernameSelector}, {"password_selector", a.PasswordSelector}, {"submit_selector", a.SubmitSelector}}
	if req.Action != BrowserLogin {
		for _, f := range fields {
			if f.v != nil {
				return fmt.Errorf("%s.%s: action %s takes no %s", docArguments, f.name, req.Action, f.name)
			}
		}
		return nil
	}
	if a.Secret == nil {
		return fmt.Errorf("%s.secret: is required for action %s", docArguments, BrowserLogin)
	}
	l := &BrowserLoginRequest{Secret: *a.Secret}
	for _, f := range []struct {
		v   *string
		dst *string
	}{{a.UsernameSelector, &l.UsernameSelector}, {a.PasswordSelector, &l.PasswordSelector}, {a.SubmitSelector, &l.SubmitSelector}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	req.Login = l
	return nil
}
