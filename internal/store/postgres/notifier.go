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
	// lateNotifyDelay is how long a notification queued as later may
	// wait for others to share its statement. A running session appends
	// every millisecond or two; sending each append's notification alone
	// cost a round trip, a server process's wake-up and every listener's
	// (this node's own included) per append.
	lateNotifyDelay = 5 * time.Millisecond
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
//
// A notification that no other node waits on to act (a lease holder's own
// append: only journal readers hear of it) may wait up to lateNotifyDelay
// for the next ones; any other is sent at once, with all that wait.
type notifier struct {
	pool     *pgxpool.Pool
	channel  string
	instance string
	onError  func(error)
	// delay is lateNotifyDelay, in nanoseconds (tests lengthen it).
	delay atomic.Int64

	mu       sync.Mutex
	pending  []store.Notification
	overflow bool
	// urgent: pending holds a notification that must not wait.
	urgent bool
	wake   chan struct{}

	// sent counts the notifications handed to PostgreSQL, for tests.
	sent atomic.Int64
}

func newNotifier(pool *pgxpool.Pool, channel, instance string, onError func(error)) *notifier {
	n := &notifier{pool: pool, channel: channel, instance: instance, onError: onError, wake: make(chan struct{}, 1)}
	n.delay.Store(int64(lateNotifyDelay))
	return n
}

// add queues notes to send at once and later to send within
// lateNotifyDelay; it never blocks.
func (n *notifier) add(notes, later []store.Notification) {
	if len(notes)+len(later) == 0 {
		return
	}
	n.mu.Lock()
	if len(n.pending)+len(notes)+len(later) > maxPendingNotes {
		n.overflow = true
	} else {
		n.pending = append(n.pending, notes...)
		n.pending = append(n.pending, later...)
	}
	n.urgent = n.urgent || len(notes) > 0 || n.overflow
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run sends what is queued until ctx ends, then sends what is left: an
// urgent notification at once, the others when the oldest has waited
// delay.
func (n *notifier) run(ctx context.Context) {
	late := time.NewTimer(lateNotifyDelay)
	late.Stop()
	waiting := false // late is set
	for {
		select {
		case <-ctx.Done():
			late.Stop()
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
			n.flush(fctx)
			cancel()
			return
		case <-n.wake:
			n.mu.Lock()
			urgent := n.urgent
			n.mu.Unlock()
			if urgent {
				n.flush(ctx)
			} else if !waiting {
				late.Reset(time.Duration(n.delay.Load()))
				waiting = true
			}
		case <-late.C:
			waiting = false
			n.flush(ctx)
		}
	}
}

func (n *notifier) flush(ctx context.Context) {
	n.mu.Lock()
	notes, overflow := n.pending, n.overflow
	n.pending, n.overflow, n.urgent = nil, false, false
	n.mu.Unlock()
	if overflow {
		notes = append(notes, store.Notification{Kind: store.KindRunnable}, store.Notification{Kind: store.KindSecrets},
			store.Notification{Kind: store.KindActionRaised})
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
// session's KindEvents only the highest seq matters (with its status), and
// a kind and session said twice is said once. The first occurrence keeps
// its place.
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
			if nt.Seq > out[i].Seq {
				// The status is the highest seq's: the commit's that
				// stored it.
				out[i].Seq, out[i].Status = nt.Seq, nt.Status
			}
			continue
		}
		at[k] = len(out)
		out = append(out, nt)
	}
	return out
}
