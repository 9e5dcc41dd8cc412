package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestKeysLifecycle: a created key's token is lh_ and 52 base32 characters,
// shown once; the store keeps only its hash (found by it), the list shows
// its prefix and never a token; revoking sets RevokedAt, again is no error,
// an unknown id is a 404.
func TestKeysLifecycle(t *testing.T) {
	f := newFixture(t)
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	k, err := f.app.CreateKey(f.ctx, &lt.CreateKeyRequest{Name: "alice", Role: lt.RoleApprover, Project: "default", ExpiresAt: &exp})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(k.ID, "key_"), k.ID)
	require.Regexp(t, `^lh_[a-z2-7]{52}$`, k.Key)
	require.Equal(t, k.Key[:11], k.Prefix)
	require.Equal(t, "alice", k.Name)
	require.Equal(t, lt.RoleApprover, k.Role)
	require.Equal(t, "default", k.Project)
	require.Equal(t, &exp, k.ExpiresAt)
	require.Nil(t, k.RevokedAt)

	row, err := f.st.APIKeyByHash(f.ctx, app.HashKeyToken(k.Key))
	require.NoError(t, err, "stored under the token's hash")
	require.Equal(t, k.ID, row.ID)
	require.NotContains(t, row.TokenHash, k.Key[len(app.KeyTokenPrefix):])

	other, err := f.app.CreateKey(f.ctx, &lt.CreateKeyRequest{Name: "ci", Role: lt.RoleOperator})
	require.NoError(t, err)
	require.Equal(t, lt.DefaultProject, other.Project, "the default project")
	require.NotEqual(t, k.Key, other.Key)
	support, err := f.app.CreateKey(f.ctx, &lt.CreateKeyRequest{Name: "bob", Role: lt.RoleReader, Project: "support"})
	require.NoError(t, err, "a key of another project: projects scope what it sees")
	require.Equal(t, "support", support.Project)

	keys, err := f.app.ListKeys(f.ctx)
	require.NoError(t, err)
	require.Len(t, keys.Data, 3)
	require.Equal(t, k.ID, keys.Data[0].ID, "oldest first")
	for _, got := range keys.Data {
		require.Empty(t, got.Key, "a list never shows a token")
		require.NotEmpty(t, got.Prefix)
	}

	require.NoError(t, f.app.RevokeKey(f.ctx, k.ID))
	require.NoError(t, f.app.RevokeKey(f.ctx, k.ID), "revoking again")
	keys, err = f.app.ListKeys(f.ctx)
	require.NoError(t, err)
	require.NotNil(t, keys.Data[0].RevokedAt, "a revoked key stays listed, revoked")
	require.Nil(t, keys.Data[1].RevokedAt)

	err = f.app.RevokeKey(f.ctx, "key_nope")
	require.Equal(t, http.StatusNotFound, apierror.From(err).Status, "%v", err)
}

// TestCreateKeyInvalid: each bad request is a 400 naming its field, and
// creates nothing.
func TestCreateKeyInvalid(t *testing.T) {
	f := newFixture(t)
	past := time.Now().Add(-time.Minute)
	for _, tc := range []struct {
		name  string
		req   *lt.CreateKeyRequest
		field string
		msg   string
	}{
		{"no body", nil, "", "missing"},
		{"no name", &lt.CreateKeyRequest{Role: lt.RoleAdmin}, "name", "name is required"},
		{"blank name", &lt.CreateKeyRequest{Name: "  ", Role: lt.RoleAdmin}, "name", "name is required"},
		{"long name", &lt.CreateKeyRequest{Name: strings.Repeat("a", app.MaxKeyName+1), Role: lt.RoleAdmin}, "name", "at most"},
		{"control in name", &lt.CreateKeyRequest{Name: "a\nb", Role: lt.RoleAdmin}, "name", "control"},
		// approvers compare names exactly: "alice " is not another person.
		{"spaced name", &lt.CreateKeyRequest{Name: "alice ", Role: lt.RoleApprover}, "name", "spaces"},
		{"comma in name", &lt.CreateKeyRequest{Name: "alice,bob", Role: lt.RoleApprover}, "name", "commas"},
		{"built-in name", &lt.CreateKeyRequest{Name: "Bootstrap", Role: lt.RoleApprover}, "name", "built-in caller"},
		{"no role", &lt.CreateKeyRequest{Name: "x"}, "role", "admin, operator, approver, reader, runner"},
		{"unknown role", &lt.CreateKeyRequest{Name: "x", Role: "root"}, "role", `"root"`},
		{"project case", &lt.CreateKeyRequest{Name: "x", Role: lt.RoleReader, Project: "Support"}, "project", `"Support"`},
		{"project slash", &lt.CreateKeyRequest{Name: "x", Role: lt.RoleReader, Project: "a/b"}, "project", "lowercase"},
		{"project too long", &lt.CreateKeyRequest{Name: "x", Role: lt.RoleReader, Project: strings.Repeat("a", 64)}, "project", "1 to 63"},
		{"expired", &lt.CreateKeyRequest{Name: "x", Role: lt.RoleReader, ExpiresAt: &past}, "expires_at", "in the future"},
	} {
		_, err := f.app.CreateKey(f.ctx, tc.req)
		e := apierror.From(err)
		require.Equal(t, http.StatusBadRequest, e.Status, "%s: %v", tc.name, err)
		require.Equal(t, tc.field, e.Field, tc.name)
		require.Contains(t, e.Message, tc.msg, tc.name)
	}
	keys, err := f.app.ListKeys(f.ctx)
	require.NoError(t, err)
	require.Empty(t, keys.Data)
}
