package app_test

import (
	"context"
	"iter"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/engine"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// countingJournals is the real engine, with its journal reads counted.
type countingJournals struct {
	*engine.Engine
	reads atomic.Int64
}

func (c *countingJournals) ListEvents(ctx context.Context, sessionID string, after int64, limit int) ([]lt.Event, error) {
	c.reads.Add(1)
	return c.Engine.ListEvents(ctx, sessionID, after, limit)
}

// TestStreamsOfOneSessionShareReads: many streams of one session each get
// every event exactly once and in order, while the store is read at most
// once per event appended, not once per stream (they share the session's
// tail); a stream that starts from the beginning, far behind the others,
// gets the whole journal too.
func TestStreamsOfOneSessionShareReads(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sess := f.create(`{"model": {"provider": "scripted", "script": [{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "d"}]}}`, "start")
	start := f.waitIdle(sess.ID).LastEventSeq
	src := &countingJournals{Engine: f.eng}
	// No poll: every read is one a notice asked for.
	trees := app.NewTrees(src, func() (<-chan time.Time, func()) { return nil, func() {} })

	const streams, turns = 30, 3
	followers := make([]*follower[lt.Event], streams)
	var opened sync.WaitGroup
	for i := range followers {
		opened.Add(1)
		ctx := app.WithOpened(f.ctx, opened.Done)
		followers[i] = follow(t, ctx, func(ctx context.Context) iter.Seq2[lt.Event, error] {
			return trees.StreamEvents(ctx, sess.ID, start)
		})
	}
	opened.Wait()
	readsBefore := src.reads.Load()
	for range turns {
		_, err := f.app.CreateTurn(f.ctx, sess.ID, &lt.CreateTurnRequest{Input: "more"})
		require.NoError(t, err)
		f.waitIdle(sess.ID)
	}
	end := f.waitIdle(sess.ID).LastEventSeq
	require.Greater(t, end, start+turns)
	for _, fw := range followers {
		for seq := start + 1; seq <= end; seq++ {
			require.Equal(t, seq, fw.next().Seq)
		}
	}
	reads := src.reads.Load() - readsBefore
	require.LessOrEqual(t, reads, end-start, "%d streams read the store %d times for %d events: they do not share reads", streams, reads, end-start)

	// A latecomer from the start: the tail does not reach back that far.
	late := follow(t, f.ctx, func(ctx context.Context) iter.Seq2[lt.Event, error] {
		return trees.StreamEvents(ctx, sess.ID, 0)
	})
	for seq := int64(1); seq <= end; seq++ {
		require.Equal(t, seq, late.next().Seq)
	}
	// And the others still follow the journal as it grows.
	_, err := f.app.CreateTurn(f.ctx, sess.ID, &lt.CreateTurnRequest{Input: "last"})
	require.NoError(t, err)
	last := f.waitIdle(sess.ID).LastEventSeq
	for _, fw := range append(followers, late) {
		for seq := end + 1; seq <= last; seq++ {
			require.Equal(t, seq, fw.next().Seq)
		}
		fw.stop()
	}
}

// TestTreeStreamsOfOneSessionShareReads: tree streams follow each session
// through its shared feed too: many of them on one session get every event
// exactly once and in order, while the store is read at most once per
// event appended once they are open.
func TestTreeStreamsOfOneSessionShareReads(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sess := f.create(`{"model": {"provider": "scripted", "script": [{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "d"}]}}`, "start")
	start := f.waitIdle(sess.ID).LastEventSeq
	src := &countingJournals{Engine: f.eng}
	// No poll: every read is one a notice asked for.
	trees := app.NewTrees(src, func() (<-chan time.Time, func()) { return nil, func() {} })

	const streams, turns = 30, 3
	followers := make([]*follower[lt.TreeEvent], streams)
	var opened sync.WaitGroup
	for i := range followers {
		opened.Add(1)
		ctx := app.WithOpened(f.ctx, opened.Done)
		followers[i] = follow(t, ctx, func(ctx context.Context) iter.Seq2[lt.TreeEvent, error] {
			return trees.StreamTreeEvents(ctx, sess.ID, strconv.FormatInt(start, 10))
		})
	}
	opened.Wait()
	readsBefore := src.reads.Load()
	for range turns {
		_, err := f.app.CreateTurn(f.ctx, sess.ID, &lt.CreateTurnRequest{Input: "more"})
		require.NoError(t, err)
		f.waitIdle(sess.ID)
	}
	end := f.waitIdle(sess.ID).LastEventSeq
	require.Greater(t, end, start+turns)
	for _, fw := range followers {
		for seq := start + 1; seq <= end; seq++ {
			ev := fw.next()
			require.Equal(t, seq, ev.Seq)
			require.Equal(t, sess.ID, ev.SessionID)
		}
		fw.stop()
	}
	reads := src.reads.Load() - readsBefore
	require.LessOrEqual(t, reads, end-start, "%d tree streams read the store %d times for %d events: they do not share reads", streams, reads, end-start)
}
