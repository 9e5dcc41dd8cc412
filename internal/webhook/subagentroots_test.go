package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRootWithALargeInputKeepsItsURL: a root created with an input over
// the engine's BlobThreshold (64 KiB; inputs up to 512 KiB are accepted)
// has its session.created moved to a blob (engine/writer.go). Its
// webhook_url is read from the blob: before, the stub was read as the
// payload, and neither the root nor any sub-agent of its tree was ever
// notified.
func TestRootWithALargeInputKeepsItsURL(t *testing.T) {
	e := newEnv(t)
	created, err := json.Marshal(map[string]any{"agent": map[string]any{"name": "a", "version": 1},
		"input": strings.Repeat("x", 100<<10), "project": lt.DefaultProject, "webhook_url": "https://app.example.com/hook"})
	require.NoError(t, err)
	sum := sha256.Sum256(created)
	h := hex.EncodeToString(sum[:])
	stub, err := json.Marshal(lt.BlobData{Blob: lt.BlobRef{SHA256: h, Size: int64(len(created))}, Preview: string(created[:1024])})
	require.NoError(t, err)
	_, err = e.st.SessionCreate(t.Context(), &store.SessionCreateParams{
		Session: store.SessionRow{ID: "root", Project: lt.DefaultProject, AgentName: "a", AgentVersion: 1, Status: "queued",
			Spec: json.RawMessage(`{}`), State: json.RawMessage(`{}`), CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()},
		Events: []store.NewEvent{{Type: lt.EventSessionCreated, Time: e.clock.Now(), Data: stub}},
		Blobs:  []store.BlobWrite{{SHA256: h, Data: created}},
	})
	require.NoError(t, err)
	e.seqs["root"] = 1
	e.createSubagent("child", "root")

	cfg := Config{Clock: e.clock}
	d, err := New(e.st, &cfg)
	require.NoError(t, err)
	e.status("child", lt.SessionRequiresAction)
	e.status("root", lt.SessionRequiresAction)
	require.NoError(t, d.scanSession(t.Context(), "child", 0, nil))
	require.NoError(t, d.scanSession(t.Context(), "root", 0, nil))
	require.Len(t, e.deliveries(), 2, "the child's and the root's requires_action, to the root's webhook_url")
}

// TestRootInAnotherProjectIsNotFollowed: a sub-agent is in its parent's
// project when spawn_agent makes it, but the store does not enforce it
// (an imported session names any parent in the target store). The walk to
// the root stops at a parent of another project: project b's session is
// not notified to project a's webhook_url, signed with a's secret (and a
// 410 there would have disabled a's URL).
func TestRootInAnotherProjectIsNotFollowed(t *testing.T) {
	e := newEnv(t)
	e.createSessionIn("a", "root", "https://a.example.com/hook")
	e.create(store.SessionRow{ID: "foreign", Project: "b", ParentID: "root"}, map[string]any{"parent_id": "root"})
	cfg := Config{Clock: e.clock}
	d, err := New(e.st, &cfg)
	require.NoError(t, err)
	e.status("foreign", lt.SessionRequiresAction)
	require.NoError(t, d.scanSession(t.Context(), "foreign", 0, nil))
	for _, row := range e.deliveries() {
		require.NotEqual(t, "https://a.example.com/hook", row.URL, "project b's session notified to project a's URL: %s", row.Body)
	}
}
