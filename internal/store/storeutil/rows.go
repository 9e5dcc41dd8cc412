package storeutil

import (
	"errors"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// NonNil returns v, or an empty slice for nil: lists are stored and returned
// as [] rather than null.
func NonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// SessionWrite is what a write to a session's journal stores beside the
// session's row: its new events, numbered; its docs, bound to the session;
// and the session's last seq once it commits.
type SessionWrite struct {
	Events  []store.Event
	Docs    []store.DocWrite
	LastSeq int64
}

// PrepareSessionCreate checks the parameters of Store.SessionCreate and
// returns the new session's row (a zero UpdatedAt taken to be CreatedAt)
// and its first write. Its errors carry the operation ("create session"),
// as the drivers return them unwrapped.
func (c Checks) PrepareSessionCreate(p *store.SessionCreateParams) (store.SessionRow, SessionWrite, error) {
	if p == nil {
		return store.SessionRow{}, SessionWrite{}, errors.New("create session: params are nil")
	}
	sess := p.Session
	if sess.UpdatedAt.IsZero() {
		sess.UpdatedAt = sess.CreatedAt
	}
	if sess.Project == "" {
		sess.Project = store.DefaultProject
	}
	if err := c.SessionCreate(&sess, p); err != nil {
		return store.SessionRow{}, SessionWrite{}, fmt.Errorf("create session: %w", err)
	}
	events := store.Numbered(sess.ID, 0, p.Events)
	docs, err := NormalizeDocs(sess.ID, p.Docs)
	if err != nil {
		return store.SessionRow{}, SessionWrite{}, fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	return sess, SessionWrite{Events: events, Docs: docs, LastSeq: int64(len(events))}, nil
}

// PrepareEventAppend checks the parameters of Store.EventAppend and returns
// its write. Its errors carry the operation ("append events").
func (c Checks) PrepareEventAppend(p *store.EventAppendParams) (SessionWrite, error) {
	if err := c.EventAppend(p); err != nil {
		return SessionWrite{}, fmt.Errorf("append events: %w", err)
	}
	events := store.Numbered(p.SessionID, p.ExpectedSeq, p.Events)
	docs, err := NormalizeDocs(p.SessionID, p.Docs)
	if err != nil {
		return SessionWrite{}, fmt.Errorf("append events to session %s: %w", p.SessionID, err)
	}
	return SessionWrite{Events: events, Docs: docs, LastSeq: p.ExpectedSeq + int64(len(events))}, nil
}

// BlobData is data as a blob stores it: an empty blob is zero bytes, never
// NULL.
func BlobData(data []byte) []byte {
	if data == nil {
		return []byte{}
	}
	return data
}

// JournalAtRefusal says why a session whose journal ends at lastSeq under
// the lease (owner, epoch) is not as pa expects it, or nil if it is:
// store.ErrLeaseLost (checked first), or store.ErrConflict. An append's
// condition is one (EventAppendParams' ExpectedSeq and Fence), a
// creation's ParentAt another.
func JournalAtRefusal(pa *store.JournalAt, lastSeq int64, owner string, epoch int64) error {
	if f := pa.Fence; f != nil && (owner != f.Owner || epoch != f.Epoch) {
		return fmt.Errorf("%w: session %s is held by %q epoch %d, fence is %q epoch %d",
			store.ErrLeaseLost, pa.SessionID, owner, epoch, f.Owner, f.Epoch)
	}
	if lastSeq != pa.ExpectedSeq {
		return fmt.Errorf("%w: the journal of session %s moved: its last seq is %d, expected %d", store.ErrConflict, pa.SessionID, lastSeq, pa.ExpectedSeq)
	}
	return nil
}

// ParentRefused marks a refusal of a creation's ParentAt: a conflict is
// also store.ErrParentMoved.
func ParentRefused(err error) error {
	if errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrParentMoved) {
		return fmt.Errorf("%w: %w", store.ErrParentMoved, err)
	}
	return err
}
