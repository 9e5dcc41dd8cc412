package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// droppingStore loses its database connection under the first append of
// a worker that holds a tool's end (tool.completed): the append is made
// or not (commit), and either way the worker hears that the database went
// away, as it does when PostgreSQL restarts under a write.
type droppingStore struct {
	store.Store
	commit  bool
	dropped atomic.Bool
}

func (s *droppingStore) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	ends := false
	for _, ev := range p.Events {
		ends = ends || ev.Type == lt.EventToolCompleted
	}
	if !ends || p.Fence == nil || !s.dropped.CompareAndSwap(false, true) {
		return s.Store.EventAppend(ctx, p)
	}
	if s.commit {
		if _, err := s.Store.EventAppend(ctx, p); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("append events to session %s: %w: %w", p.SessionID, store.ErrUnavailable,
		errors.New("FATAL: terminating connection due to administrator command (SQLSTATE 57P01)"))
}

// TestDatabaseGoneUnderAWrite: a session whose worker loses the database
// under a write (committed or not: the worker cannot tell) is not failed.
// The worker waits, starts over from the journal, and the turn completes
// with the call's end journaled once.
func TestDatabaseGoneUnderAWrite(t *testing.T) {
	for _, commit := range []bool{false, true} {
		t.Run(fmt.Sprintf("committed=%v", commit), func(t *testing.T) {
			t.Parallel()
			var dropping *droppingStore
			h := newHarnessThrough(t, scripted.New(nil), 0, func(h *harness) store.Store {
				dropping = &droppingStore{Store: h.store, commit: commit}
				return dropping
			})
			s := create(t, h, spec(t, `[{"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"x"}}]},{"text":"done"}]`,
				lt.ToolSpec{Name: "write_file"}), nil)
			got := h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
			require.Equal(t, lt.SessionIdle, got.Status, "the journal:\n%s", journalText(t, h, s.ID))
			require.True(t, dropping.dropped.Load(), "the connection was dropped under the write")
			require.Len(t, events(t, h, s.ID, lt.EventToolCompleted), 1, "the journal:\n%s", journalText(t, h, s.ID))
			require.Empty(t, events(t, h, s.ID, lt.EventTurnFailed))
			require.Contains(t, h.clock.waits(), time.Second, "it waited before starting over")
			checkJournal(t, h.store, s.ID)
		})
	}
}
