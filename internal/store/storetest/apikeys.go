package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

// tokenHash is a token's stored form: its SHA-256 in lowercase hex.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// apiKeyRow is a well-formed key whose token is "token of " + id.
func apiKeyRow(id string, created time.Time) *store.APIKeyRow {
	return &store.APIKeyRow{
		ID:        id,
		Name:      "name of " + id,
		Role:      "approver",
		Project:   "support",
		Prefix:    "lh_ABCDEFGH",
		TokenHash: tokenHash("token of " + id),
		CreatedAt: created,
	}
}

// testAPIKeys: create, then get by id and by token hash, list oldest first;
// revoke keeps its first time; touch only moves forward; unknown ids and
// hashes are ErrNotFound; a taken id or token hash is ErrConflict.
func testAPIKeys(t *testing.T, h *harness) {
	unknown := tokenHash("nobody's token")
	_, err := h.s.APIKeyByHash(h.ctx, unknown)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = h.s.APIKeyGet(h.ctx, "key_nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, h.s.APIKeyRevoke(h.ctx, "key_nope", t0), store.ErrNotFound)
	require.ErrorIs(t, h.s.APIKeyTouch(h.ctx, "key_nope", t0), store.ErrNotFound)
	list, err := h.s.APIKeyList(h.ctx)
	require.NoError(t, err)
	require.Empty(t, list)

	b := apiKeyRow("key_b", at(time.Second))
	b.ExpiresAt = ptr(at(time.Hour))
	require.NoError(t, h.s.APIKeyCreate(h.ctx, b))
	a := apiKeyRow("key_a", at(2*time.Second))
	a.Role, a.Project = "admin", "default"
	require.NoError(t, h.s.APIKeyCreate(h.ctx, a))

	got, err := h.s.APIKeyGet(h.ctx, "key_b")
	require.NoError(t, err)
	require.Equal(t, b, got)
	got, err = h.s.APIKeyByHash(h.ctx, a.TokenHash)
	require.NoError(t, err)
	require.Equal(t, a, got)

	list, err = h.s.APIKeyList(h.ctx)
	require.NoError(t, err)
	require.Equal(t, []*store.APIKeyRow{b, a}, list, "oldest first")

	dupID := apiKeyRow("key_a", at(3*time.Second))
	dupID.TokenHash = unknown
	require.ErrorIs(t, h.s.APIKeyCreate(h.ctx, dupID), store.ErrConflict, "taken id")
	dupHash := apiKeyRow("key_c", at(3*time.Second))
	dupHash.TokenHash = a.TokenHash
	require.ErrorIs(t, h.s.APIKeyCreate(h.ctx, dupHash), store.ErrConflict, "taken token hash")

	// Touch moves forward only: uses reported out of order keep the latest.
	require.NoError(t, h.s.APIKeyTouch(h.ctx, "key_a", at(time.Minute)))
	require.NoError(t, h.s.APIKeyTouch(h.ctx, "key_a", at(30*time.Second)))
	got, err = h.s.APIKeyGet(h.ctx, "key_a")
	require.NoError(t, err)
	require.Equal(t, ptr(at(time.Minute)), got.LastUsedAt)

	// Revoke: the row stays, found by its hash, with its first revocation time.
	require.NoError(t, h.s.APIKeyRevoke(h.ctx, "key_a", at(2*time.Minute)))
	require.NoError(t, h.s.APIKeyRevoke(h.ctx, "key_a", at(3*time.Minute)))
	got, err = h.s.APIKeyByHash(h.ctx, a.TokenHash)
	require.NoError(t, err)
	require.Equal(t, ptr(at(2*time.Minute)), got.RevokedAt)
	got, err = h.s.APIKeyGet(h.ctx, "key_b")
	require.NoError(t, err)
	require.Nil(t, got.RevokedAt, "only the revoked key is")
	require.Nil(t, got.LastUsedAt)
}

// testAPIKeyCreateInvalid: malformed rows are refused before they are
// written.
func testAPIKeyCreateInvalid(t *testing.T, h *harness) {
	for name, mod := range map[string]func(*store.APIKeyRow){
		"empty id":       func(r *store.APIKeyRow) { r.ID = "" },
		"empty name":     func(r *store.APIKeyRow) { r.Name = "" },
		"empty role":     func(r *store.APIKeyRow) { r.Role = "" },
		"empty project":  func(r *store.APIKeyRow) { r.Project = "" },
		"empty prefix":   func(r *store.APIKeyRow) { r.Prefix = "" },
		"hash not hex":   func(r *store.APIKeyRow) { r.TokenHash = "lh_the-token-itself" },
		"zero created":   func(r *store.APIKeyRow) { r.CreatedAt = time.Time{} },
		"zero expiry":    func(r *store.APIKeyRow) { r.ExpiresAt = &time.Time{} },
		"zero last used": func(r *store.APIKeyRow) { r.LastUsedAt = &time.Time{} },
	} {
		r := apiKeyRow("key_bad", t0)
		mod(r)
		require.Error(t, h.s.APIKeyCreate(h.ctx, r), name)
	}
	require.Error(t, h.s.APIKeyCreate(h.ctx, nil))
	_, err := h.s.APIKeyByHash(h.ctx, "not a hash")
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrNotFound, "a malformed hash is refused, not looked up")
	list, err := h.s.APIKeyList(h.ctx)
	require.NoError(t, err)
	require.Empty(t, list, "nothing was written")
}

// testAPIKeysClosed: every key method of a closed store is ErrClosed.
func testAPIKeysClosed(t *testing.T, h *harness) {
	require.NoError(t, h.s.Close())
	r := apiKeyRow("key_closed", t0)
	require.ErrorIs(t, h.s.APIKeyCreate(h.ctx, r), store.ErrClosed, "APIKeyCreate")
	_, err := h.s.APIKeyGet(h.ctx, r.ID)
	require.ErrorIs(t, err, store.ErrClosed, "APIKeyGet")
	_, err = h.s.APIKeyByHash(h.ctx, r.TokenHash)
	require.ErrorIs(t, err, store.ErrClosed, "APIKeyByHash")
	_, err = h.s.APIKeyList(h.ctx)
	require.ErrorIs(t, err, store.ErrClosed, "APIKeyList")
	require.ErrorIs(t, h.s.APIKeyRevoke(h.ctx, r.ID, t0), store.ErrClosed, "APIKeyRevoke")
	require.ErrorIs(t, h.s.APIKeyTouch(h.ctx, r.ID, t0), store.ErrClosed, "APIKeyTouch")
}
