package app_test

import (
	"context"
	"iter"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// follower ranges over a stream in a goroutine of its own, as a transport
// does, and hands each value to the test.
type follower[T any] struct {
	t      *testing.T
	values chan T
	// err receives the stream's end: its error, or nil when it stopped
	// without one.
	err    chan error
	cancel context.CancelFunc
}

func follow[T any](t *testing.T, ctx context.Context, stream func(context.Context) iter.Seq2[T, error]) *follower[T] {
	ctx, cancel := context.WithCancel(ctx)
	fw := &follower[T]{t: t, values: make(chan T), err: make(chan error, 1), cancel: cancel}
	go func() {
		for v, err := range stream(ctx) {
			if err != nil {
				fw.err <- err
				return
			}
			select {
			case fw.values <- v:
			case <-ctx.Done():
			}
		}
		fw.err <- nil
	}()
	t.Cleanup(cancel)
	return fw
}

// next returns the stream's next value, failing if it ends or nothing
// comes in time.
func (fw *follower[T]) next() T {
	fw.t.Helper()
	select {
	case v := <-fw.values:
		return v
	case err := <-fw.err:
		fw.t.Fatalf("the stream ended (%v) while a value was due", err)
	case <-time.After(15 * time.Second):
		fw.t.Fatal("no value within 15 s")
	}
	panic("unreachable")
}

// stop cancels the stream's ctx and requires that it ends without an
// error.
func (fw *follower[T]) stop() {
	fw.t.Helper()
	fw.cancel()
	select {
	case err := <-fw.err:
		require.NoError(fw.t, err, "a stream whose ctx ends stops without an error")
	case <-time.After(15 * time.Second):
		fw.t.Fatal("the stream did not stop within 15 s of its ctx ending")
	}
}

func TestStreamEventsFollowsAndResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sess := f.create(leafSpec, "follow me")
	id := sess.ID

	// Opened while the session runs: its whole journal, in order, each
	// event once, with the journal's bytes.
	fw := follow(t, f.ctx, func(ctx context.Context) iter.Seq2[lt.Event, error] { return f.app.StreamEvents(ctx, id, 0) })
	done := f.waitIdle(id)
	journal := f.journal(id)
	require.EqualValues(t, done.LastEventSeq, len(journal))
	for i := range journal {
		require.Equal(t, journal[i], fw.next(), "seq %d", i+1)
	}

	// Live: a follow-up turn's events arrive on the open stream.
	_, err := f.app.CreateTurn(f.ctx, id, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	f.waitIdle(id)
	journal = f.journal(id)
	require.Greater(t, len(journal), int(done.LastEventSeq))
	for i := int(done.LastEventSeq); i < len(journal); i++ {
		require.Equal(t, journal[i], fw.next(), "seq %d", i+1)
	}
	// Caught up and waiting: ending ctx ends it, without an error.
	fw.stop()

	// Resumed after seq 3: from seq 4 on.
	resumed := follow(t, f.ctx, func(ctx context.Context) iter.Seq2[lt.Event, error] { return f.app.StreamEvents(ctx, id, 3) })
	for i := 3; i < len(journal); i++ {
		require.Equal(t, journal[i], resumed.next())
	}
	resumed.stop()

	// Errors of the request are the stream's only value.
	for _, c := range []struct {
		id     string
		after  int64
		status int
		field  string
	}{{"ses_missing", 0, http.StatusNotFound, ""}, {id, -1, http.StatusBadRequest, "after"}} {
		var errs []error
		for ev, err := range f.app.StreamEvents(f.ctx, c.id, c.after) {
			require.Zero(t, ev)
			errs = append(errs, err)
		}
		require.Len(t, errs, 1)
		requireAPIError(t, errs[0], c.status, c.field)
	}
}

// treeModel checks a tree stream's values: per session, each seq follows
// the last one seen, and each value's cursor is the position after it.
type treeModel struct {
	t      *testing.T
	cursor lt.TreeCursor
	seen   int
}

func (m *treeModel) check(ev lt.TreeEvent) {
	m.t.Helper()
	require.Equal(m.t, m.cursor[ev.SessionID]+1, ev.Seq, "session %s: seq order, each once", ev.SessionID)
	m.cursor[ev.SessionID] = ev.Seq
	require.Equal(m.t, m.cursor.String(), ev.Cursor)
	m.seen++
}

// caughtUp reports whether the model has every event of each session.
func (m *treeModel) caughtUp(f *fixture, ids ...string) bool {
	for _, id := range ids {
		if int(m.cursor[id]) < len(f.journal(id)) {
			return false
		}
	}
	return true
}

func TestStreamTreeEventsFollowsASpawnAndResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The first turn answers; the second spawns a sub-agent and waits.
	spec := `{"model": {"provider": "scripted", "script": [{"text": "first"},
	    {"tool_calls": [{"name": "spawn_agent", "arguments": {"agent_spec": ` + leafSpec + `, "input": "sub-task"}}]},
	    {"tool_calls": [{"name": "wait_agents", "arguments": {}}]}, {"text": "all done"}]},
	  "instructions": "Delegate.", "tools": [{"name": "spawn_agent"}, {"name": "wait_agents"}]}`
	root := f.create(spec, "delegate").ID
	f.waitIdle(root)

	fw := follow(t, f.ctx, func(ctx context.Context) iter.Seq2[lt.TreeEvent, error] {
		return f.app.StreamTreeEvents(ctx, root, "")
	})
	m := &treeModel{t: t, cursor: lt.TreeCursor{}}
	for !m.caughtUp(f, root) {
		m.check(fw.next())
	}

	// A spawn while following: the child is followed from its start.
	_, err := f.app.CreateTurn(f.ctx, root, &lt.CreateTurnRequest{Input: "now delegate"})
	require.NoError(t, err)
	var child, afterSpawn string
	for child == "" {
		ev := fw.next()
		m.check(ev)
		if ev.SessionID != root {
			child, afterSpawn = ev.SessionID, ev.Cursor
		}
	}
	require.Equal(t, []string{child}, f.spawnedChildren(root))
	f.waitIdle(child)
	f.waitIdle(root)
	for !m.caughtUp(f, root, child) {
		m.check(fw.next())
	}
	total := len(f.journal(root)) + len(f.journal(child))
	require.Equal(t, total, m.seen, "both journals, whole, once: %v %d %d", m.cursor, len(f.journal(root)), len(f.journal(child)))
	fw.stop()

	// Resumed from a cursor: exactly what came after it.
	start, err := lt.ParseTreeCursor(afterSpawn)
	require.NoError(t, err)
	rm := &treeModel{t: t, cursor: maps.Clone(start)}
	resumed := follow(t, f.ctx, func(ctx context.Context) iter.Seq2[lt.TreeEvent, error] {
		return f.app.StreamTreeEvents(ctx, root, afterSpawn)
	})
	for !rm.caughtUp(f, root, child) {
		rm.check(resumed.next())
	}
	require.Equal(t, total-int(start[root])-int(start[child]), rm.seen)
	resumed.stop()

	// A cursor of another tree, or neither a cursor nor a seq: refused,
	// naming cursor.
	other := f.create(leafSpec, "another tree").ID
	for _, cursor := range []string{lt.TreeCursor{root: 1, other: 1}.String(), "t1.%%%", "-7", "seven"} {
		var errs []error
		for _, err := range f.app.StreamTreeEvents(f.ctx, root, cursor) {
			errs = append(errs, err)
		}
		require.Len(t, errs, 1, cursor)
		requireAPIError(t, errs[0], http.StatusBadRequest, "cursor")
	}
}
