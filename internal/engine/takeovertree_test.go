package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// recordingModel is a provider that keeps what each call was sent.
type recordingModel struct {
	model.Provider
	mu   sync.Mutex
	sent []string // each request's messages, joined
}

func (p *recordingModel) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	var b strings.Builder
	for _, m := range req.Messages {
		b.WriteString(m.Text)
		b.WriteString("\n")
	}
	p.mu.Lock()
	p.sent = append(p.sent, b.String())
	p.mu.Unlock()
	return p.Provider.Respond(ctx, req)
}

// told counts the requests whose messages hold s.
func (p *recordingModel) told(s string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, m := range p.sent {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// TestTakeOverOfAPausedTree: a person changes the workspace a root shares
// with its sub-agents. While any of them can run (running, or only asked
// to pause) it is a 409 naming it; once the root's pause has paused all
// of them, the change is made, journaled in the root, told to every
// sub-agent in its own journal (workspace.changed with via, applied
// nowhere again, counted once), and each model, the root's and the
// sub-agents', reads it at its next call after the resume.
func TestTakeOverOfAPausedTree(t *testing.T) {
	gt := newGate()
	rec := &recordingModel{Provider: scripted.New(&scripted.Config{After: gt.after})}
	h := newHarnessWith(t, map[string]model.Provider{"scripted": rec}, nil)
	ctx := context.Background()
	tr := startPauseTree(t, h, gt)

	_, err := h.eng.WriteFile(ctx, tr.root, "hint.txt", []byte("use blue"), "")
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 409, ae.Status)
	require.ErrorContains(t, err, "pause "+tr.root+" first")

	pauseNow(t, h, tr.root)
	_, err = h.eng.WriteFile(ctx, tr.root, "hint.txt", []byte("use blue"), "")
	require.ErrorContains(t, err, "sub-agent "+tr.g+" running", "g is only asked to pause: its call is in flight")
	l, err := h.eng.ListFiles(ctx, tr.root, ".")
	require.NoError(t, err)
	require.False(t, l.Writable)

	gt.open(t) // g's call answers; g pauses before its write_file
	h.waitStatus(tr.g, lt.SessionPaused)
	l, err = h.eng.ListFiles(ctx, tr.root, ".")
	require.NoError(t, err)
	require.True(t, l.Writable, "the whole tree is paused")
	ch, err := h.eng.WriteFile(ctx, tr.root, "hint.txt", []byte("use blue"), "")
	require.NoError(t, err)
	require.Empty(t, ch.Via)
	got, err := os.ReadFile(filepath.Join(h.dir, "workspaces", tr.root, "hint.txt"))
	require.NoError(t, err)
	require.Equal(t, "use blue", string(got))

	require.Len(t, events(t, h, tr.root, lt.EventWorkspaceChanged), 1)
	for _, id := range []string{tr.a, tr.b, tr.g} {
		evs := events(t, h, id, lt.EventWorkspaceChanged)
		require.Len(t, evs, 1, "sub-agent %s is told", id)
		d := data[lt.WorkspaceChange](t, evs[0])
		require.Equal(t, tr.root, d.Via)
		require.Equal(t, "hint.txt", d.Path)
		require.Equal(t, ch.SHA256, d.SHA256)
		_, st, err := h.eng.LoadStateForTest(ctx, id)
		require.NoError(t, err)
		require.Empty(t, st.PersonChanges, "applied in the root's workspace only")
		require.Empty(t, st.Tally.Decisions, "one change, counted in the root")
	}

	resume(t, h, tr.root)
	answerAsk(t, h, tr.b, "blue")
	s := h.waitStatus(tr.root, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", s.StopReason)
	require.Equal(t, 4, rec.told("wrote hint.txt"), "the root and its three sub-agents were each told once")
	for _, id := range []string{tr.root, tr.a, tr.b, tr.g} {
		checkJournal(t, h.store, id)
	}
}
