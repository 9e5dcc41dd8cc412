package vault_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/vault"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestLoginSecret: a login secret ({"login": {"username": …}}, the value
// the password) is handed to the browser only for a page on one of its
// hosts, is never injected into a request, and is refused as a login
// when it is another kind; every refusal names it without the value.
func TestLoginSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	m, _, err := e.v.Put(ctx, "", "SHOP_LOGIN", canary, []string{"shop.example.com"}, vault.Injection{Login: &lt.SecretLogin{Username: "alice@example.com"}})
	require.NoError(t, err)
	require.Equal(t, vault.Injection{Login: &lt.SecretLogin{Username: "alice@example.com"}}, m.Inject, "no header: a login goes into no request")
	_, _, err = e.v.Put(ctx, "", "API_TOKEN", "api-token-12345", []string{"shop.example.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)

	l, err := e.v.Login(ctx, "", "SHOP_LOGIN", "shop.example.com:443")
	require.NoError(t, err)
	require.Equal(t, "alice@example.com", l.Username)
	require.Equal(t, canary, l.Password)
	require.True(t, l.Bound("shop.example.com:8443"))
	require.False(t, l.Bound("evil.example.com:443"))
	require.NotContains(t, l.String()+l.GoString(), canary)

	var errs []error
	_, err = e.v.Login(ctx, "", "SHOP_LOGIN", "evil.example.com:443")
	var notBound *vault.NotBoundError
	require.ErrorAs(t, err, &notBound)
	errs = append(errs, err)
	_, err = e.v.Login(ctx, "", "API_TOKEN", "shop.example.com:443")
	var notLogin *vault.NotLoginError
	require.ErrorAs(t, err, &notLogin)
	require.Equal(t, "API_TOKEN", notLogin.NotLogin())
	errs = append(errs, err)
	_, err = e.v.Login(ctx, "", "NOPE", "shop.example.com:443")
	var unknown *vault.UnknownSecretError
	require.ErrorAs(t, err, &unknown)
	_, err = e.v.Login(ctx, "other", "SHOP_LOGIN", "shop.example.com:443")
	require.ErrorAs(t, err, &unknown, "another project's sessions do not have it")
	errs = append(errs, err)
	// Nor is it a model's key, even toward its own host; and it is not
	// said to go with a request there (CheckBound lists what does).
	_, err = e.v.ValueFor(ctx, "", "SHOP_LOGIN", "shop.example.com:443")
	var loginOnly *vault.LoginOnlyError
	require.ErrorAs(t, err, &loginOnly)
	require.Equal(t, "SHOP_LOGIN", loginOnly.LoginOnly())
	errs = append(errs, err)
	require.ErrorAs(t, e.v.CheckBound(ctx, "", "SHOP_LOGIN", "shop.example.com:443"), &loginOnly)
	require.NoError(t, e.v.CheckBound(ctx, "", "API_TOKEN", "shop.example.com:443"))
	for _, err := range errs {
		require.NotContains(t, err.Error(), canary)
	}

	// http_request (and the egress proxy) never get it as a header.
	src, err := e.v.Source(ctx, "", []string{"SHOP_LOGIN", "API_TOKEN"})
	require.NoError(t, err)
	creds := src.ForHost("shop.example.com:443")
	require.Len(t, creds, 1)
	require.Equal(t, "API_TOKEN", creds[0].Name)
	// Its value is redacted like any other.
	red, err := e.v.Redactor(ctx)
	require.NoError(t, err)
	require.Equal(t, "pw [REDACTED:SHOP_LOGIN]", red.String("pw "+canary))

	for _, bad := range []struct {
		inj   vault.Injection
		field string
	}{
		{vault.Injection{Login: &lt.SecretLogin{Username: " "}}, "inject.login.username"},
		{vault.Injection{Login: &lt.SecretLogin{Username: "a\nb"}}, "inject.login.username"},
		{vault.Injection{Login: &lt.SecretLogin{Username: strings.Repeat("u", 300)}}, "inject.login.username"},
		{vault.Injection{Login: &lt.SecretLogin{Username: "bob"}, Bearer: true}, "inject.login"},
		{vault.Injection{Login: &lt.SecretLogin{Username: "bob"}, Header: "X-Pw"}, "inject.login"},
	} {
		_, _, err := e.v.Put(ctx, "", "BAD_LOGIN", canary, []string{"shop.example.com"}, bad.inj)
		var ae *apierror.Error
		require.True(t, errors.As(err, &ae), "%v", err)
		require.Equal(t, bad.field, ae.Field, "%v", err)
		require.NotContains(t, err.Error(), canary)
	}
}
