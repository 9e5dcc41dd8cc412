package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/longhaul-dev/longhaul/internal/browser"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// browserLogin resolves the secret a browser login names (browser.Config's
// Login): it must be one of the agent's environment.secrets (nothing
// widens its own powers: a sub-agent names only its parent's), a login
// secret, and bound to dest, the login page's host and port. The refusals
// name the secret, never its value.
func (r *runner) browserLogin(ctx context.Context, name, dest string) (*tool.LoginSecret, error) {
	var names []string
	if env := r.spec.Environment; env != nil {
		names = env.Secrets
	}
	if !slices.Contains(names, name) {
		return nil, &browser.LoginRefusedError{Reason: fmt.Sprintf("secret %q is not one of the agent's secrets (environment.secrets)", name)}
	}
	if r.e.cfg.Vault == nil {
		return nil, &browser.LoginRefusedError{Reason: "this server has no vault"}
	}
	sec, err := r.e.cfg.Vault.Login(ctx, r.project, name, dest)
	var (
		unknown  interface{ UnknownSecret() string }
		notBound interface{ NotBound() string }
		notLogin interface{ NotLogin() string }
	)
	if errors.As(err, &unknown) || errors.As(err, &notBound) || errors.As(err, &notLogin) {
		return nil, &browser.LoginRefusedError{Reason: err.Error()}
	}
	return sec, err
}

// loginEvidence is what a login's approval shows beside its address: the
// secret's name (its values never enter the call or its evidence).
func loginEvidence(action, secret string) string {
	if action != tool.BrowserLogin {
		return ""
	}
	return fmt.Sprintf(", signing in with the user name and password of vault secret %s (the server types them into the page's form; the agent never sees them)", secret)
}

// DefaultBrowserMemory is what Config.BrowserMemory is when zero.
const DefaultBrowserMemory = browser.DefaultMemoryBytes
