package vault

import (
	"context"
	"fmt"
	"slices"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// NotLoginError is the error of a secret asked for as a web site's login
// that is not one (its injection is not {"login": …}). It names the secret,
// never the value.
type NotLoginError struct{ Name string }

// NotLogin names the secret (the engine tells this error from a storage
// failure by it).
func (e *NotLoginError) NotLogin() string { return e.Name }

func (e *NotLoginError) Error() string {
	return fmt.Sprintf(`secret %s is not a login: set it with inject {"login": {"username": "…"}} (longhaul secret set %s --login-user USER) to use it with the browser's login action`, e.Name, e.Name)
}

// LoginOnlyError is the error of a login secret asked for as anything but
// the browser's login: a model's key, a request's header. A web site's
// password is typed into that site's form, never sent in a header, even to
// its own hosts. It names the secret, never the value.
type LoginOnlyError struct{ Name string }

// LoginOnly names the secret (the engine tells this error from a storage
// failure by it).
func (e *LoginOnlyError) LoginOnly() string { return e.Name }

func (e *LoginOnlyError) Error() string {
	return fmt.Sprintf("secret %s is a login: only the browser's login action uses it, never as a key or in a request's header", e.Name)
}

// Login returns the login secret name of project ("": the default
// project), for the browser's login action, if dest (the login page's host
// and port) is one of its hosts: an unknown name is an
// *UnknownSecretError, an unbound destination a *NotBoundError, a secret
// that is not a login a *NotLoginError. The returned Bound keeps to the
// hosts of the row decrypted, for the checks the browser makes on the page
// it fills.
func (v *Vault) Login(ctx context.Context, project, name, dest string) (*tool.LoginSecret, error) {
	rows, err := v.rowsFor(ctx, project, []string{name})
	if err != nil {
		return nil, err
	}
	m, err := meta(rows[0])
	if err != nil {
		return nil, err
	}
	if m.Inject.Login == nil {
		return nil, &NotLoginError{Name: name}
	}
	if !HostMatches(m.Hosts, dest) {
		return nil, &NotBoundError{Name: name, Dest: dest}
	}
	password, err := v.open(rows[0])
	if err != nil {
		return nil, err
	}
	hosts := slices.Clone(m.Hosts)
	return &tool.LoginSecret{
		Name: name, Username: m.Inject.Login.Username, Password: password,
		Bound: func(dest string) bool { return HostMatches(hosts, dest) },
	}, nil
}
