package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

// secretRow is a well-formed row; the store treats ciphertext and nonce as
// opaque bytes, so any bytes do.
func secretRow(name string, created time.Time) *store.SecretRow {
	return &store.SecretRow{
		Project:    project,
		Name:       name,
		Ciphertext: []byte("ciphertext of " + name + "\x00\xff"),
		Nonce:      []byte("nonce-12byte"),
		KeyID:      "key-1",
		Hosts:      []string{"api.example.com", "*.example.org"},
		Inject:     json.RawMessage(`{"header":"Authorization","format":"Bearer {value}"}`),
		CreatedAt:  created,
		UpdatedAt:  created,
	}
}

// testSecrets: put creates then replaces (keeping CreatedAt), get and list
// return exactly what was put, delete removes, and unknown names are
// ErrNotFound.
func testSecrets(t *testing.T, h *harness) {
	_, err := h.s.SecretGet(h.ctx, project, "NOPE")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, h.s.SecretDelete(h.ctx, project, "NOPE"), store.ErrNotFound)
	list, err := h.s.SecretList(h.ctx, "")
	require.NoError(t, err)
	require.Empty(t, list)

	b := secretRow("B_TOKEN", at(time.Second))
	created, err := h.s.SecretPut(h.ctx, b)
	require.NoError(t, err)
	require.True(t, created)
	a := secretRow("A_TOKEN", at(2*time.Second))
	a.Hosts = []string{}
	created, err = h.s.SecretPut(h.ctx, a)
	require.NoError(t, err)
	require.True(t, created)

	got, err := h.s.SecretGet(h.ctx, project, "B_TOKEN")
	require.NoError(t, err)
	requireSecret(t, b, got)

	// Replace: new ciphertext, hosts and injection; CreatedAt stays.
	b2 := secretRow("B_TOKEN", at(time.Hour))
	b2.Ciphertext = []byte("new ciphertext")
	b2.Nonce = []byte("other-nonce!")
	b2.KeyID = "key-2"
	b2.Hosts = []string{"api.other.com"}
	b2.Inject = json.RawMessage(`{"bearer":true}`)
	b2.UpdatedAt = at(time.Hour)
	created, err = h.s.SecretPut(h.ctx, b2)
	require.NoError(t, err)
	require.False(t, created, "a second put replaces")
	got, err = h.s.SecretGet(h.ctx, project, "B_TOKEN")
	require.NoError(t, err)
	want := *b2
	want.CreatedAt = b.CreatedAt
	requireSecret(t, &want, got)

	list, err = h.s.SecretList(h.ctx, "")
	require.NoError(t, err)
	require.Len(t, list, 2)
	requireSecret(t, a, list[0]) // by name
	requireSecret(t, &want, list[1])

	require.NoError(t, h.s.SecretDelete(h.ctx, project, "A_TOKEN"))
	_, err = h.s.SecretGet(h.ctx, project, "A_TOKEN")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, h.s.SecretDelete(h.ctx, project, "A_TOKEN"), store.ErrNotFound)
	list, err = h.s.SecretList(h.ctx, "")
	require.NoError(t, err)
	require.Len(t, list, 1)

	// Deleted, then put again: created anew.
	created, err = h.s.SecretPut(h.ctx, a)
	require.NoError(t, err)
	require.True(t, created)
}

func requireSecret(t *testing.T, want, got *store.SecretRow) {
	t.Helper()
	require.Equal(t, want.Project, got.Project)
	require.Equal(t, want.Name, got.Name)
	require.Equal(t, want.Ciphertext, got.Ciphertext)
	require.Equal(t, want.Nonce, got.Nonce)
	require.Equal(t, want.KeyID, got.KeyID)
	require.Equal(t, want.Hosts, got.Hosts)
	requireJSON(t, string(want.Inject), got.Inject)
	require.Equal(t, want.CreatedAt, got.CreatedAt)
	require.Equal(t, want.UpdatedAt, got.UpdatedAt)
}

// testSecretPutInvalid: malformed rows are refused before they are written.
func testSecretPutInvalid(t *testing.T, h *harness) {
	for name, mod := range map[string]func(*store.SecretRow){
		"empty name":       func(r *store.SecretRow) { r.Name = "" },
		"empty ciphertext": func(r *store.SecretRow) { r.Ciphertext = nil },
		"empty nonce":      func(r *store.SecretRow) { r.Nonce = nil },
		"empty key id":     func(r *store.SecretRow) { r.KeyID = "" },
		"empty host":       func(r *store.SecretRow) { r.Hosts = []string{"a.example.com", ""} },
		"empty inject":     func(r *store.SecretRow) { r.Inject = nil },
		"invalid inject":   func(r *store.SecretRow) { r.Inject = json.RawMessage(`{"header":`) },
		"zero created":     func(r *store.SecretRow) { r.CreatedAt = time.Time{} },
		"zero updated":     func(r *store.SecretRow) { r.UpdatedAt = time.Time{} },
	} {
		r := secretRow("BAD", t0)
		mod(r)
		_, err := h.s.SecretPut(h.ctx, r)
		require.Error(t, err, name)
	}
	_, err := h.s.SecretPut(h.ctx, nil)
	require.Error(t, err)
	list, err := h.s.SecretList(h.ctx, "")
	require.NoError(t, err)
	require.Empty(t, list, "nothing was written")
}

// testSecretConcurrentPut: of concurrent first puts of one name exactly one
// creates it; every put succeeds.
func testSecretConcurrentPut(t *testing.T, h *harness) {
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		creates int
	)
	for i := range n {
		wg.Go(func() {
			r := secretRow("RACE", at(time.Duration(i)*time.Second))
			r.Ciphertext = fmt.Appendf(nil, "ciphertext %d", i)
			created, err := h.s.SecretPut(h.ctx, r)
			if !assertNoError(t, err) {
				return
			}
			if created {
				mu.Lock()
				creates++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, creates)
}

// assertNoError reports err from a goroutine other than the test's.
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// testSecretNotifications: a put and a delete notify subscribers after
// their commit.
func testSecretNotifications(t *testing.T, h *harness) {
	ch, cancel := h.s.Subscribe(h.ctx)
	defer cancel()
	_, err := h.s.SecretPut(h.ctx, secretRow("NOTIFY", t0))
	require.NoError(t, err)
	expect(t, ch, store.Notification{Kind: store.KindSecrets})
	require.NoError(t, h.s.SecretDelete(h.ctx, project, "NOTIFY"))
	expect(t, ch, store.Notification{Kind: store.KindSecrets})
}

// testSecretsClosed: every secret method of a closed store is ErrClosed.
func testSecretsClosed(t *testing.T, h *harness) {
	require.NoError(t, h.s.Close())
	_, err := h.s.SecretPut(h.ctx, secretRow("CLOSED", t0))
	require.ErrorIs(t, err, store.ErrClosed, "SecretPut")
	_, err = h.s.SecretGet(h.ctx, project, "CLOSED")
	require.ErrorIs(t, err, store.ErrClosed, "SecretGet")
	_, err = h.s.SecretList(h.ctx, "")
	require.ErrorIs(t, err, store.ErrClosed, "SecretList")
	require.ErrorIs(t, h.s.SecretDelete(h.ctx, project, "CLOSED"), store.ErrClosed, "SecretDelete")
}
