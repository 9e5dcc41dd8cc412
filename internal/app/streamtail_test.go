package app_test

import (
	"context"
	"iter"
	"strconv"
	"strings"
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

// sharedStreams are streams of one session that has run a turn, opened on
// Trees whose store reads are counted.
type sharedStreams[T any] struct {
	f         *fixture
	sess      *lt.Session
	start     int64 // the session's last seq when the streams opened
	src       *countingJournals
	trees     *app.Trees
	followers []*follower[T]
	// readsBefore is the store reads made before the streams opened.
	readsBefore int64
}

// openSharedStreams opens n streams, each as stream makes it from start.
func openSharedStreams[T any](t *testing.T, n int, stream func(ctx context.Context, trees *app.Trees, id string, start int64) iter.Seq2[T, error]) *sharedStreams[T] {
	f := newFixture(t)
	sess := f.create(`{"model": {"provider": "scripted", "script": [{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "d"}]}}`, "start")
	sh := &sharedStreams[T]{f: f, sess: sess, start: f.waitIdle(sess.ID).LastEventSeq, src: &countingJournals{Engine: f.eng}}
	// No poll: every read is one a notice asked for.
	sh.trees = app.NewTrees(sh.src, func() (<-chan time.Time, func()) { return nil, func() {} })
	var opened sync.WaitGroup
	for range n {
		opened.Add(1)
		ctx := app.WithOpened(f.ctx, opened.Done)
		sh.followers = append(sh.followers, follow(t, ctx, func(ctx context.Context) iter.Seq2[T, error] {
			return stream(ctx, sh.trees, sess.ID, sh.start)
		}))
	}
	opened.Wait()
	sh.readsBefore = sh.src.reads.Load()
	return sh
}

// runTurns runs turns more turns of the session and returns its last seq.
func (sh *sharedStreams[T]) runTurns(t *testing.T, turns int) int64 {
	for range turns {
		_, err := sh.f.app.CreateTurn(sh.f.ctx, sh.sess.ID, &lt.CreateTurnRequest{Input: "more"})
		require.NoError(t, err)
		sh.f.waitIdle(sh.sess.ID)
	}
	end := sh.f.waitIdle(sh.sess.ID).LastEventSeq
	require.Greater(t, end, sh.start+int64(turns))
	return end
}

// requireSharedReads fails unless the store was read at most once per
// event appended since the streams opened.
func (sh *sharedStreams[T]) requireSharedReads(t *testing.T, end int64) {
	reads := sh.src.reads.Load() - sh.readsBefore
	require.LessOrEqual(t, reads, end-sh.start, "%d streams read the store %d times for %d events: they do not share reads",
		len(sh.followers), reads, end-sh.start)
}

// TestStreamsOfOneSessionShareReads: many streams of one session each get
// every event exactly once and in order, while the store is read at most
// once per event appended, not once per stream (they share the session's
// tail); a stream that starts from the beginning, far behind the others,
// gets the whole journal too.
func TestStreamsOfOneSessionShareReads(t *testing.T) {
	t.Parallel()
	sh := openSharedStreams(t, 30, func(ctx context.Context, trees *app.Trees, id string, start int64) iter.Seq2[lt.Event, error] {
		return trees.StreamEvents(ctx, id, start)
	})
	f, sess, start, followers := sh.f, sh.sess, sh.start, sh.followers
	end := sh.runTurns(t, 3)
	for _, fw := range followers {
		for seq := start + 1; seq <= end; seq++ {
			require.Equal(t, seq, fw.next().Seq)
		}
	}
	sh.requireSharedReads(t, end)

	// A latecomer from the start: the tail does not reach back that far.
	late := follow(t, f.ctx, func(ctx context.Context) iter.Seq2[lt.Event, error] {
		return sh.trees.StreamEvents(ctx, sess.ID, 0)
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
	sh := openSharedStreams(t, 30, func(ctx context.Context, trees *app.Trees, id string, start int64) iter.Seq2[lt.TreeEvent, error] {
		return trees.StreamTreeEvents(ctx, id, strconv.FormatInt(start, 10))
	})
	end := sh.runTurns(t, 3)
	for _, fw := range sh.followers {
		for seq := sh.start + 1; seq <= end; seq++ {
			ev := fw.next()
			require.Equal(t, seq, ev.Seq)
			require.Equal(t, sh.sess.ID, ev.SessionID)
		}
		fw.stop()
	}
	sh.requireSharedReads(t, end)
}

// TestSlowStreamCatchesUpFromTheStore: a stream whose consumer stops
// reading falls behind the session's shared tail; meanwhile a fast stream
// of the same session gets every event of each turn before the next turn
// starts (the slow one holds nothing up), and once the slow consumer reads
// again its stream reads what the tail no longer holds from the store and
// yields every event, in order, with no gap and nothing twice.
func TestSlowStreamCatchesUpFromTheStore(t *testing.T) {
	t.Parallel()
	// The tail keeps 8 events here; a turn journals a few, so these
	// turns outgrow it twice over.
	const keep, turns = 8, 6
	script := make([]string, turns+1)
	for i := range script {
		script[i] = `{"text": "ok"}`
	}
	f := newFixture(t)
	sess := f.create(`{"model": {"provider": "scripted", "script": [`+strings.Join(script, ",")+`]}}`, "start")
	start := f.waitIdle(sess.ID).LastEventSeq
	src := &countingJournals{Engine: f.eng}
	trees := app.NewTrees(src, func() (<-chan time.Time, func()) { return nil, func() {} })
	app.SetTailKeep(trees, keep)
	var opened sync.WaitGroup
	open := func() *follower[lt.Event] {
		opened.Add(1)
		return follow(t, app.WithOpened(f.ctx, opened.Done), func(ctx context.Context) iter.Seq2[lt.Event, error] {
			return trees.StreamEvents(ctx, sess.ID, start)
		})
	}
	fast, slow := open(), open()
	opened.Wait()

	next := start + 1 // the fast stream's next seq
	for i := range turns {
		_, err := f.app.CreateTurn(f.ctx, sess.ID, &lt.CreateTurnRequest{Input: "more"})
		require.NoError(t, err)
		last := f.waitIdle(sess.ID).LastEventSeq
		if i == 0 {
			// The slow consumer takes the first event, then nothing: its
			// stream waits to hand over the second.
			require.Equal(t, start+1, slow.next().Seq)
		}
		for ; next <= last; next++ {
			require.Equal(t, next, fast.next().Seq, "the fast stream gets each turn's events while the slow one is stuck")
		}
	}
	end := next - 1
	require.Greater(t, end-start, int64(2*keep))

	readsBefore := src.reads.Load()
	for seq := start + 2; seq <= end; seq++ {
		ev := slow.next()
		require.Equal(t, seq, ev.Seq, "the slow stream catches up with no gap and nothing twice")
	}
	require.Greater(t, src.reads.Load(), readsBefore, "what the tail no longer holds is read from the store")

	// Both follow the journal on from there.
	_, err := f.app.CreateTurn(f.ctx, sess.ID, &lt.CreateTurnRequest{Input: "last"})
	require.NoError(t, err)
	last := f.waitIdle(sess.ID).LastEventSeq
	for _, fw := range []*follower[lt.Event]{fast, slow} {
		for seq := end + 1; seq <= last; seq++ {
			require.Equal(t, seq, fw.next().Seq)
		}
		fw.stop()
	}
}
