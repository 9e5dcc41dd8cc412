package vault_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/vault"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// canary is a value that must never appear anywhere but in ForHost.
const canary = "canary-7f3a9c2e-d41d-8cd9-8f00-b204e9800998"

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type env struct {
	dir   string
	st    *sqlite.Store
	v     *vault.Vault
	key   []byte
	clock *clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(t.Context()))
	t.Cleanup(func() { _ = st.Close() })
	key, err := vault.LoadKey("", filepath.Join(dir, vault.DefaultKeyFile))
	require.NoError(t, err)
	c := &clock{t: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)}
	v, err := vault.Open(st, key, &vault.Config{Now: c.Now})
	require.NoError(t, err)
	return &env{dir: dir, st: st, v: v, key: key, clock: c}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	m, created, err := e.v.Put(ctx, "", "GITHUB_TOKEN", canary, []string{"API.GitHub.com", "*.githubusercontent.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, &vault.Meta{
		Project: lt.DefaultProject, Name: "GITHUB_TOKEN", Hosts: []string{"api.github.com", "*.githubusercontent.com"},
		Inject:    vault.Injection{Header: "Authorization", Bearer: true},
		CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now(),
	}, m)
	_, _, err = e.v.Put(ctx, "", "DOCS_KEY", "docs-key-123456", []string{"docs.example.com"}, vault.Injection{Header: "x-api-key"})
	require.NoError(t, err)
	_, _, err = e.v.Put(ctx, "", "REGISTRY", "registry-pass", []string{"10.0.0.7", "registry.example.com"}, vault.Injection{Basic: &lt.SecretBasicAuth{Username: "ci"}})
	require.NoError(t, err)
	_, _, err = e.v.Put(ctx, "", "LEGACY", "legacy-token-1", []string{"legacy.example.com"}, vault.Injection{Header: "Authorization", Format: "token {value}"})
	require.NoError(t, err)
	m, _, err = e.v.Put(ctx, "", "PROXY", "proxy-token-1", []string{"proxy.example.com"}, vault.Injection{Bearer: true, Header: "proxy-authorization"})
	require.NoError(t, err)
	require.Equal(t, vault.Injection{Header: "Proxy-Authorization", Bearer: true}, m.Inject, "another header than Authorization")

	values, err := e.v.Values(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		"GITHUB_TOKEN": canary, "DOCS_KEY": "docs-key-123456", "REGISTRY": "registry-pass", "LEGACY": "legacy-token-1",
		"PROXY": "proxy-token-1",
	}, values)

	src, err := e.v.Source(ctx, "", []string{"REGISTRY", "GITHUB_TOKEN", "DOCS_KEY", "LEGACY"})
	require.NoError(t, err)
	require.Equal(t, []tool.Credential{{Name: "GITHUB_TOKEN", Header: "Authorization", Value: "Bearer " + canary}}, src.ForHost("api.github.com"))
	require.Equal(t, src.ForHost("api.github.com"), src.ForHost("API.GITHUB.COM.:443"), "case, trailing dot and port do not matter")
	require.Len(t, src.ForHost("objects.githubusercontent.com"), 1)
	require.Len(t, src.ForHost("a.b.githubusercontent.com"), 1, "a wildcard covers every depth")
	require.Empty(t, src.ForHost("githubusercontent.com"), "a wildcard does not cover its own domain")
	require.Empty(t, src.ForHost("github.com"))
	require.Empty(t, src.ForHost("api.github.com.evil.example"))
	require.Empty(t, src.ForHost("evilapi.github.com"))
	require.Equal(t, []tool.Credential{{Name: "DOCS_KEY", Header: "X-Api-Key", Value: "docs-key-123456"}}, src.ForHost("docs.example.com"))
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ci:registry-pass"))
	require.Equal(t, []tool.Credential{{Name: "REGISTRY", Header: "Authorization", Value: basic}}, src.ForHost("[10.0.0.7]:5000"))
	require.Equal(t, []tool.Credential{{Name: "LEGACY", Header: "Authorization", Value: "token legacy-token-1"}}, src.ForHost("legacy.example.com"))

	// A source holds only the secrets it was asked for.
	only, err := e.v.Source(ctx, "", []string{"DOCS_KEY"})
	require.NoError(t, err)
	require.Empty(t, only.ForHost("api.github.com"))
	require.NotContains(t, fmt.Sprintf("%v %+v %#v", only, only, only), "docs-key-123456")

	// Replace: new value and hosts, the creation time stays.
	e.clock.Advance(time.Hour)
	m, created, err = e.v.Put(ctx, "", "GITHUB_TOKEN", "new-value-123", []string{"api.github.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, e.clock.Now().Add(-time.Hour), m.CreatedAt)
	require.Equal(t, e.clock.Now(), m.UpdatedAt)
	values, err = e.v.Values(ctx)
	require.NoError(t, err)
	require.Equal(t, "new-value-123", values["GITHUB_TOKEN"])

	list, err := e.v.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, list, 5)
	require.Equal(t, "DOCS_KEY", list[0].Name)
	require.Equal(t, "GITHUB_TOKEN", list[1].Name)
	require.Equal(t, []string{"api.github.com"}, list[1].Hosts)

	require.NoError(t, e.v.Delete(ctx, "", "GITHUB_TOKEN"))
	err = e.v.Delete(ctx, "", "GITHUB_TOKEN")
	requireAPIError(t, err, 404, "")
	_, err = e.v.Source(ctx, "", []string{"DOCS_KEY", "GITHUB_TOKEN"})
	var unknown *vault.UnknownSecretError
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, vault.UnknownSecretError{Name: "GITHUB_TOKEN", Index: 1, Project: lt.DefaultProject}, *unknown)
	require.ErrorAs(t, e.v.Require(ctx, "", []string{"NOPE"}), &unknown)
	require.NoError(t, e.v.Require(ctx, "", []string{"DOCS_KEY", "LEGACY"}))
	require.NoError(t, e.v.Check(ctx))
}

func requireAPIError(t *testing.T, err error, status int, field string) *apierror.Error {
	t.Helper()
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, status, ae.Status, "%v", err)
	require.Equal(t, field, ae.Field, "%v", err)
	return ae
}

func TestWrongKeyFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	_, _, err := e.v.Put(ctx, "", "TOKEN", canary, []string{"api.example.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)

	other := bytes.Repeat([]byte{7}, vault.KeySize)
	v2, err := vault.Open(e.st, other, nil)
	require.NoError(t, err)
	require.NotEqual(t, e.v.KeyID(), v2.KeyID())
	_, err = v2.Values(ctx)
	require.ErrorContains(t, err, "sealed with key "+e.v.KeyID()+" but the vault has key "+v2.KeyID())
	require.NotContains(t, err.Error(), canary)
	require.Error(t, v2.Check(ctx))
	_, err = v2.Source(ctx, "", []string{"TOKEN"})
	require.Error(t, err)
	_, err = v2.Redactor(ctx)
	require.Error(t, err)

	// A row that claims the right key id but was sealed with another key
	// does not authenticate either.
	row, err := e.st.SecretGet(ctx, lt.DefaultProject, "TOKEN")
	require.NoError(t, err)
	row.KeyID = v2.KeyID()
	_, err = e.st.SecretPut(ctx, row)
	require.NoError(t, err)
	_, err = v2.Values(ctx)
	require.ErrorContains(t, err, "does not authenticate")
}

// TestSwappedRowFailsToDecrypt: a row's ciphertext copied under another
// name (by someone with write access to the database) is refused, so one
// secret's value cannot be sent to another secret's hosts.
func TestSwappedRowFailsToDecrypt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	_, _, err := e.v.Put(ctx, "", "PROD_TOKEN", canary, []string{"api.prod.example.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)
	_, _, err = e.v.Put(ctx, "", "TEST_TOKEN", "test-token-value", []string{"attacker.example.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)

	prod, err := e.st.SecretGet(ctx, lt.DefaultProject, "PROD_TOKEN")
	require.NoError(t, err)
	test, err := e.st.SecretGet(ctx, lt.DefaultProject, "TEST_TOKEN")
	require.NoError(t, err)
	test.Ciphertext, test.Nonce = prod.Ciphertext, prod.Nonce
	_, err = e.st.SecretPut(ctx, test)
	require.NoError(t, err)

	_, err = e.v.Source(ctx, "", []string{"TEST_TOKEN"})
	require.ErrorContains(t, err, "decrypt secret TEST_TOKEN: the ciphertext does not authenticate")
	require.NotContains(t, err.Error(), canary)
	err = e.v.Check(ctx)
	require.ErrorContains(t, err, "TEST_TOKEN")
	require.NotContains(t, err.Error(), "PROD_TOKEN", "the intact row still decrypts")

	// A flipped bit is refused too.
	prod.Ciphertext[0] ^= 1
	_, err = e.st.SecretPut(ctx, prod)
	require.NoError(t, err)
	_, err = e.v.Source(ctx, "", []string{"PROD_TOKEN"})
	require.ErrorContains(t, err, "does not authenticate")
}

func TestValidationNamesTheFieldAndNeverTheValue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	hosts := []string{"api.example.com"}
	bearer := vault.Injection{Bearer: true}
	long := strings.Repeat("x", vault.MaxValueLen+1)
	for _, tc := range []struct {
		name, secret, value string
		hosts               []string
		inject              vault.Injection
		field               string
	}{
		{"lower-case name", "token", canary, hosts, bearer, "name"},
		{"name with a dash", "MY-TOKEN", canary, hosts, bearer, "name"},
		{"name starting with a digit", "1TOKEN", canary, hosts, bearer, "name"},
		{"name too long", "A" + strings.Repeat("B", 64), canary, hosts, bearer, "name"},
		{"empty value", "TOKEN", "", hosts, bearer, "value"},
		{"short value", "TOKEN", "short12", hosts, bearer, "value"},
		{"long value", "TOKEN", long, hosts, bearer, "value"},
		{"line break in value", "TOKEN", canary + "\r\nX-Evil: 1", hosts, bearer, "value"},
		{"NUL in value", "TOKEN", canary + "\x00", hosts, bearer, "value"},
		{"no hosts", "TOKEN", canary, nil, bearer, "hosts"},
		{"URL as host", "TOKEN", canary, []string{"https://api.example.com/v1"}, bearer, "hosts[0]"},
		{"port out of range", "TOKEN", canary, []string{"api.example.com", "api.example.com:65536"}, bearer, "hosts[1]"},
		{"port zero", "TOKEN", canary, []string{"api.example.com:0"}, bearer, "hosts[0]"},
		{"port not a number", "TOKEN", canary, []string{"api.example.com:https"}, bearer, "hosts[0]"},
		{"IPv6 with a port, no brackets", "TOKEN", canary, []string{"::1:8443:x"}, bearer, "hosts[0]"},
		{"duplicate host with port", "TOKEN", canary, []string{"LOCAL.example.com:8443", "local.example.com.:8443"}, bearer, "hosts[1]"},
		{"bare wildcard", "TOKEN", canary, []string{"*"}, bearer, "hosts[0]"},
		{"wildcard on a TLD", "TOKEN", canary, []string{"*.com"}, bearer, "hosts[0]"},
		{"invalid label", "TOKEN", canary, []string{"api..example.com"}, bearer, "hosts[0]"},
		{"duplicate host", "TOKEN", canary, []string{"a.example.com", "A.example.com."}, bearer, "hosts[1]"},
		{"too many hosts", "TOKEN", canary, make([]string, vault.MaxHosts+1), bearer, "hosts"},
		{"no injection", "TOKEN", canary, hosts, vault.Injection{}, "inject.header"},
		{"bearer and basic", "TOKEN", canary, hosts, vault.Injection{Bearer: true, Basic: &lt.SecretBasicAuth{}}, "inject"},
		{"bearer with format", "TOKEN", canary, hosts, vault.Injection{Bearer: true, Format: "x {value}"}, "inject.format"},
		{"format without placeholder", "TOKEN", canary, hosts, vault.Injection{Header: "Authorization", Format: "Bearer"}, "inject.format"},
		{"format with a line break", "TOKEN", canary, hosts, vault.Injection{Header: "Authorization", Format: "{value}\r\nX: y"}, "inject.format"},
		{"bad header name", "TOKEN", canary, hosts, vault.Injection{Header: "X Api Key"}, "inject.header"},
		{"framing header", "TOKEN", canary, hosts, vault.Injection{Header: "content-length"}, "inject.header"},
		{"host header", "TOKEN", canary, hosts, vault.Injection{Header: "Host"}, "inject.header"},
		{"colon in user", "TOKEN", canary, hosts, vault.Injection{Basic: &lt.SecretBasicAuth{Username: "a:b"}}, "inject.basic.username"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.v.Put(ctx, "", tc.secret, tc.value, tc.hosts, tc.inject)
			ae := requireAPIError(t, err, 400, tc.field)
			require.NotContains(t, ae.Message, canary)
			require.NotContains(t, err.Error(), canary)
			if tc.value == long {
				require.NotContains(t, ae.Message, "xxxxxxxx")
			}
		})
	}
	list, err := e.v.List(ctx, "")
	require.NoError(t, err)
	require.Empty(t, list)

	// The API refuses a missing injection.
	_, _, err = vault.NewAPI(e.v).PutSecret(ctx, "TOKEN", &lt.PutSecretRequest{Value: canary, Hosts: hosts})
	requireAPIError(t, err, 400, "inject")
}

// TestValueNeverInMetadataOrStorage: List and the API give no value, and the
// database files (WAL included) hold no form of it.
func TestValueNeverInMetadataOrStorage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	api := vault.NewAPI(e.v)
	s, created, err := api.PutSecret(ctx, "CANARY", &lt.PutSecretRequest{
		Value: canary, Hosts: []string{"api.example.com"}, Inject: &vault.Injection{Header: "Authorization", Format: "Bearer {value}"},
	})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, lt.SecretInjection{Header: "Authorization", Format: "Bearer {value}"}, s.Inject)
	list, err := api.ListSecrets(ctx, "")
	require.NoError(t, err)
	metas, err := e.v.List(ctx, "")
	require.NoError(t, err)
	printed := fmt.Sprintf("%v %+v %#v %v %+v", s, list, list, metas, &lt.PutSecretRequest{Value: canary})
	require.NotContains(t, printed, canary)
	require.NotContains(t, printed, "Bearer "+canary)

	// A few more writes, so the value's pages are in the WAL and in the
	// main file after a checkpoint.
	for i := range 3 {
		_, _, err := e.v.Put(ctx, "", fmt.Sprintf("OTHER_%d", i), fmt.Sprintf("other-value-%d", i), []string{"x.example.com"}, vault.Injection{Bearer: true})
		require.NoError(t, err)
	}
	requireNoCanaryInFiles(t, e.dir)
	require.NoError(t, e.st.Close())
	requireNoCanaryInFiles(t, e.dir)
}

// requireNoCanaryInFiles scans every file under dir except the key file for
// the canary, raw or encoded.
func requireNoCanaryInFiles(t *testing.T, dir string) {
	t.Helper()
	forms := [][]byte{
		[]byte(canary),
		[]byte(hex.EncodeToString([]byte(canary))),
		[]byte(base64.StdEncoding.EncodeToString([]byte(canary))[:40]),
	}
	scanned := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == vault.DefaultKeyFile {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		scanned++
		for _, f := range forms {
			require.False(t, bytes.Contains(data, f), "%s holds the canary", d.Name())
		}
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, scanned, 1)
}

func TestRedactorFollowsChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	r, err := e.v.Redactor(ctx)
	require.NoError(t, err)
	require.True(t, r.Empty())
	_, _, err = e.v.Put(ctx, "", "TOKEN", canary, []string{"api.example.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)
	r, err = e.v.Redactor(ctx)
	require.NoError(t, err)
	require.Equal(t, "auth: [REDACTED:TOKEN]", r.String("auth: "+canary))
	again, err := e.v.Redactor(ctx)
	require.NoError(t, err)
	require.Same(t, r, again, "unchanged secrets reuse the redactor")

	// Another vault (another node) changes a secret; Invalidate picks it up.
	other, err := vault.Open(e.st, e.key, nil)
	require.NoError(t, err)
	_, _, err = other.Put(ctx, "", "SECOND", "second-value", []string{"api.example.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)
	stale, err := e.v.Redactor(ctx)
	require.NoError(t, err)
	require.Equal(t, "second-value", stale.String("second-value"))
	e.v.Invalidate()
	fresh, err := e.v.Redactor(ctx)
	require.NoError(t, err)
	require.Equal(t, "[REDACTED:SECOND]", fresh.String("second-value"))

	require.NoError(t, e.v.Delete(ctx, "", "TOKEN"))
	r, err = e.v.Redactor(ctx)
	require.NoError(t, err)
	require.Equal(t, canary, r.String(canary))
}

func TestLoadKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", vault.DefaultKeyFile)

	key, err := vault.LoadKey("", path)
	require.NoError(t, err)
	require.Len(t, key, vault.KeySize)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	again, err := vault.LoadKey("", path)
	require.NoError(t, err)
	require.Equal(t, key, again, "the key file is read back")

	// The environment wins over the file.
	envKey := bytes.Repeat([]byte{0xab}, vault.KeySize)
	got, err := vault.LoadKey(base64.StdEncoding.EncodeToString(envKey), path)
	require.NoError(t, err)
	require.Equal(t, envKey, got)
	got, err = vault.LoadKey(" "+base64.RawURLEncoding.EncodeToString(envKey)+"\n", "")
	require.NoError(t, err)
	require.Equal(t, envKey, got)

	short := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	_, err = vault.LoadKey(short, path)
	require.ErrorContains(t, err, "LONGHAUL_VAULT_KEY: the key must be 32 bytes, got 16")
	require.NotContains(t, err.Error(), short)
	_, err = vault.LoadKey("not base64 at all!", path)
	require.ErrorContains(t, err, "not valid base64")
	require.NotContains(t, err.Error(), "not base64 at all")
	_, err = vault.LoadKey("", "")
	require.ErrorContains(t, err, "no vault key")

	require.NoError(t, os.Chmod(path, 0o644))
	_, err = vault.LoadKey("", path)
	require.ErrorContains(t, err, "can be read by other users")
	require.NoError(t, os.Chmod(path, 0o600))

	bad := filepath.Join(dir, "bad.key")
	require.NoError(t, os.WriteFile(bad, []byte("garbage\n"), 0o600))
	_, err = vault.LoadKey("", bad)
	require.ErrorContains(t, err, "bad.key: the key must be 32 bytes")

	_, err = vault.Open(nil, key, nil)
	require.Error(t, err)
	_, err = vault.Open(&fakeStore{}, key[:16], nil)
	require.ErrorContains(t, err, "must be 32 bytes")
}

// TestConcurrentKeyCreation: processes racing to create the key file all
// end up with the one key that was written.
func TestConcurrentKeyCreation(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), vault.DefaultKeyFile)
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := vault.LoadKey("", path)
			if err != nil {
				t.Errorf("load key: %v", err)
				return
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		require.Equal(t, keys[0], k)
	}
}

// fakeStore is a store.Store whose secret methods fail, to check that
// storage errors surface without values.
type fakeStore struct{ store.Store }

var errBroken = errors.New("storage is broken")

func (fakeStore) SecretPut(context.Context, *store.SecretRow) (bool, error) { return false, errBroken }
func (fakeStore) SecretList(context.Context, string) ([]*store.SecretRow, error) {
	return nil, errBroken
}
func (fakeStore) SecretDelete(context.Context, string, string) error { return errBroken }

func TestStorageErrors(t *testing.T) {
	t.Parallel()
	v, err := vault.Open(fakeStore{}, bytes.Repeat([]byte{1}, vault.KeySize), nil)
	require.NoError(t, err)
	ctx := context.Background()
	_, _, err = v.Put(ctx, "", "TOKEN", canary, []string{"a.example.com"}, vault.Injection{Bearer: true})
	require.ErrorIs(t, err, errBroken)
	require.NotContains(t, err.Error(), canary)
	_, err = v.List(ctx, "")
	require.ErrorIs(t, err, errBroken)
	_, err = v.Values(ctx)
	require.ErrorIs(t, err, errBroken)
	require.ErrorIs(t, v.Delete(ctx, "", "TOKEN"), errBroken)
	_, err = v.Source(ctx, "", []string{"TOKEN"})
	require.ErrorIs(t, err, errBroken)
}

// TestPortBinding: a host bound with a port takes that port only; a host
// bound without one takes every port; a destination given without a port
// gets only the secrets bound to no port.
func TestPortBinding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	m, _, err := e.v.Put(ctx, "", "LOCAL_TOKEN", canary, []string{"127.0.0.1:8443", "[::1]:8443", "Svc.Example.com.:9000", "*.corp.example:8080"}, vault.Injection{Bearer: true})
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:8443", "[::1]:8443", "svc.example.com:9000", "*.corp.example:8080"}, m.Hosts, "canonical form")
	_, _, err = e.v.Put(ctx, "", "ANY_PORT", "any-port-value", []string{"127.0.0.1", "::1"}, vault.Injection{Header: "X-Key"})
	require.NoError(t, err)

	src, err := e.v.Source(ctx, "", []string{"LOCAL_TOKEN", "ANY_PORT"})
	require.NoError(t, err)
	names := func(dest string) []string {
		var out []string
		for _, c := range src.ForHost(dest) {
			out = append(out, c.Name)
		}
		return out
	}
	require.Equal(t, []string{"ANY_PORT", "LOCAL_TOKEN"}, names("127.0.0.1:8443"))
	require.Equal(t, []string{"ANY_PORT"}, names("127.0.0.1:8444"), "another port of the bound address")
	require.Equal(t, []string{"ANY_PORT"}, names("127.0.0.1"), "no port: only the bindings without one")
	require.Equal(t, []string{"ANY_PORT", "LOCAL_TOKEN"}, names("[::1]:8443"))
	require.Equal(t, []string{"ANY_PORT", "LOCAL_TOKEN"}, names("[::ffff:127.0.0.1]:8443"), "the mapped form is the same address")
	require.Equal(t, []string{"LOCAL_TOKEN"}, names("SVC.example.com:9000"))
	require.Empty(t, names("svc.example.com:443"))
	require.Equal(t, []string{"LOCAL_TOKEN"}, names("a.b.corp.example:8080"))
	require.Empty(t, names("a.corp.example:80"))

	require.NoError(t, e.v.CheckBound(ctx, "", "LOCAL_TOKEN", "127.0.0.1:8443"))
	var notBound *vault.NotBoundError
	require.ErrorAs(t, e.v.CheckBound(ctx, "", "LOCAL_TOKEN", "127.0.0.1:9999"), &notBound)
	var unknown *vault.UnknownSecretError
	require.ErrorAs(t, e.v.CheckBound(ctx, "", "NOPE", "127.0.0.1:8443"), &unknown)

	v, err := e.v.ValueFor(ctx, "", "LOCAL_TOKEN", "127.0.0.1:8443")
	require.NoError(t, err)
	require.Equal(t, canary, v)
	v, err = e.v.ValueFor(ctx, "", "LOCAL_TOKEN", "127.0.0.1:9999")
	require.ErrorAs(t, err, &notBound)
	require.Empty(t, v)
	require.NotContains(t, err.Error(), canary)

	// The hosts change: the value follows the new binding at once.
	_, _, err = e.v.Put(ctx, "", "LOCAL_TOKEN", canary, []string{"127.0.0.1:9999"}, vault.Injection{Bearer: true})
	require.NoError(t, err)
	_, err = e.v.ValueFor(ctx, "", "LOCAL_TOKEN", "127.0.0.1:8443")
	require.ErrorAs(t, err, &notBound)
	v, err = e.v.ValueFor(ctx, "", "LOCAL_TOKEN", "127.0.0.1:9999")
	require.NoError(t, err)
	require.Equal(t, canary, v)
}

// TestProjectsKeepTheirSecrets: the same name in two projects is two
// secrets; a project resolves only its own (Source, Require, ValueFor),
// never another's, whatever name it gives; and a row copied into another
// project (by someone with write access to the database) does not decrypt
// there.
func TestProjectsKeepTheirSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	_, _, err := e.v.Put(ctx, "alpha", "TOKEN", canary, []string{"api.example.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)
	m, created, err := e.v.Put(ctx, "beta", "TOKEN", "beta-token-value", []string{"api.example.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)
	require.True(t, created, "the same name in another project is another secret")
	require.Equal(t, "beta", m.Project)
	_, _, err = e.v.Put(ctx, "alpha", "ONLY_ALPHA", "only-alpha-value", []string{"api.example.com"}, vault.Injection{Bearer: true})
	require.NoError(t, err)

	src, err := e.v.Source(ctx, "beta", []string{"TOKEN"})
	require.NoError(t, err)
	creds := src.ForHost("api.example.com")
	require.Len(t, creds, 1)
	require.Equal(t, "Bearer beta-token-value", creds[0].Value)
	value, err := e.v.ValueFor(ctx, "alpha", "TOKEN", "api.example.com")
	require.NoError(t, err)
	require.Equal(t, canary, value)

	var unknown *vault.UnknownSecretError
	_, err = e.v.Source(ctx, "beta", []string{"ONLY_ALPHA"})
	require.ErrorAs(t, err, &unknown, "beta cannot name alpha's secret")
	require.EqualError(t, err, "secret ONLY_ALPHA does not exist in project beta (set it with `longhaul secret set ONLY_ALPHA --project beta`)")
	require.ErrorAs(t, e.v.Require(ctx, "beta", []string{"ONLY_ALPHA"}), &unknown)
	_, err = e.v.ValueFor(ctx, "beta", "ONLY_ALPHA", "api.example.com")
	require.ErrorAs(t, err, &unknown)
	_, err = e.v.Source(ctx, "", []string{"TOKEN"})
	require.ErrorAs(t, err, &unknown, "the default project has no TOKEN")

	all, err := e.v.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, all, 3)
	beta, err := e.v.List(ctx, "beta")
	require.NoError(t, err)
	require.Len(t, beta, 1)
	require.Equal(t, "beta", beta[0].Project)

	// The redactor knows every project's values.
	r, err := e.v.Redactor(ctx)
	require.NoError(t, err)
	require.NotContains(t, string(r.Bytes([]byte("a "+canary+" and beta-token-value"))), canary)
	require.NotContains(t, string(r.Bytes([]byte("beta-token-value"))), "beta-token-value")

	// Alpha's row moved into gamma keeps its name but not its project.
	row, err := e.st.SecretGet(ctx, "alpha", "TOKEN")
	require.NoError(t, err)
	row.Project = "gamma"
	_, err = e.st.SecretPut(ctx, row)
	require.NoError(t, err)
	_, err = e.v.Source(ctx, "gamma", []string{"TOKEN"})
	require.ErrorContains(t, err, "does not authenticate")
	require.NotContains(t, err.Error(), canary)

	require.NoError(t, e.v.Delete(ctx, "alpha", "TOKEN"))
	_, err = e.v.ValueFor(ctx, "beta", "TOKEN", "api.example.com")
	require.NoError(t, err, "deleting alpha's TOKEN leaves beta's")
	var ae *apierror.Error
	require.ErrorAs(t, e.v.Delete(ctx, "alpha", "TOKEN"), &ae)
	require.Equal(t, 404, ae.Status)
}
