package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/longhaul-dev/longhaul/internal/store"
)

const (
	// maxPendingNotes bounds the notifications waiting to be sent; past it
	// they are replaced by hints without a session (subscribers re-read).
	maxPendingNotes = 100000
	// notesPerStatement bounds one NOTIFY statement.
	notesPerStatement = 1000
	// notifyTimeout bounds one NOTIFY statement, and the last flush at Close.
	notifyTimeout = 5 * time.Second
)

// notifier sends the notifications of committed writes to the other nodes,
// after the commit and off the writers' path, coalesced: everything pending
// goes in one autocommit statement.
//
// Why not NOTIFY inside the write's transaction: PostgreSQL serialises the
// commits of notifying transactions with a cluster-wide lock held through
// the commit's WAL flush, so every append would wait for every other's
// flush. A statement that only notifies writes no WAL and holds that lock
// for a moment. The price: a node that dies between a commit and the next
// send loses those notifications, which, being hints, the other nodes make
// up for by re-reading (schedulers poll; a journal that grows again
// notifies again).
type notifier struct {
	pool     *pgxpool.Pool
	channel  string
	instance string
	onError  func(error)

	mu       sync.Mutex
	pending  []store.Notification
	overflow bool
	wake     chan struct{}

	// sent counts the notifications handed to PostgreSQL, for tests.
	sent atomic.Int64
}

func newNotifier(pool *pgxpool.Pool, channel, instance string, onError func(error)) *notifier {
	return &notifier{pool: pool, channel: channel, instance: instance, onError: onError, wake: make(chan struct{}, 1)}
}

// add queues notes to send; it never blocks.
func (n *notifier) add(notes []store.Notification) {
	if len(notes) == 0 {
		return
	}
	n.mu.Lock()
	if len(n.pending)+len(notes) > maxPendingNotes {
		n.overflow = true
	} else {
		n.pending = append(n.pending, notes...)
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run sends what is queued until ctx ends, then sends what is left.
func (n *notifier) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
			n.flush(fctx)
			cancel()
			return
		case <-n.wake:
			n.flush(ctx)
		}
	}
}

func (n *notifier) flush(ctx context.Context) {
	n.mu.Lock()
	notes, overflow := n.pending, n.overflow
	n.pending, n.overflow = nil, false
	n.mu.Unlock()
	if overflow {
		notes = append(notes, store.Notification{Kind: store.KindRunnable}, store.Notification{Kind: store.KindSecrets})
	}
	notes = coalesce(notes)
	for len(notes) > 0 {
		chunk := notes[:min(len(notes), notesPerStatement)]
		notes = notes[len(chunk):]
		sctx, cancel := context.WithTimeout(ctx, notifyTimeout)
		_, err := n.pool.Exec(sctx, notifySQL, n.channel, encodeNotes(n.instance, chunk))
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				n.onError(err)
			}
			continue
		}
		n.sent.Add(int64(len(chunk)))
	}
}

// coalesce drops notifications that another in notes makes redundant: of a
// session's KindEvents only the highest seq matters, and a kind and session
// said twice is said once. The first occurrence keeps its place.
func coalesce(notes []store.Notification) []store.Notification {
	type key struct {
		kind    store.NotificationKind
		session string
	}
	at := make(map[key]int, len(notes))
	out := notes[:0:0]
	for _, nt := range notes {
		k := key{nt.Kind, nt.SessionID}
		if i, ok := at[k]; ok {
			out[i].Seq = max(out[i].Seq, nt.Seq)
			continue
		}
		at[k] = len(out)
		out = append(out, nt)
	}
	return out
}
