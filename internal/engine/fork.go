package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// idToken matches the ids a journal mentions that belong to one session
// (its turns, actions, effects, artifacts, checkpoints, and itself): a fork
// gets its own, since those ids are unique across sessions. These are the
// shapes the engine makes (a ULID or a hash, after the type's prefix).
var idToken = regexp.MustCompile(`^(?:ses|turn|act|eff|art|ckpt)_[0-9a-z]{20,64}$`)

// idString matches a JSON string that may be an id: a type's prefix and the
// characters an import accepts (export's checkSessionID and checkDocID).
// Which of them a fork renames is decided per match (forkRenamer): a
// session imported from another store may carry ids of other shapes,
// which are its own all the same and would collide with the origin's rows
// in the fork.
var idString = regexp.MustCompile(`"[a-z]{1,16}_[0-9A-Za-z_-]{1,128}"`)

// ForkSession creates a session from a checkpoint of another: the journal up
// to the checkpoint (ids renamed), the workspace from its snapshot, and the
// effects before it inherited as done — never run again. The fork links to
// its origin (session.forked) and continues from where the checkpoint
// stood; with an input it starts a new turn.
//
// A fork's webhook state is written with it: its signing secret,
// webhookSecret (returned in WebhookSecret when the fork has a
// webhook_url, its origin's or req's), and its notifications, to every
// target, starting after the events it copied, which were its origin's.
// Without webhookSecret (a test's fork) the dispatcher makes the state
// later, from the fork's first event, with a secret nobody is given.
func (e *Engine) ForkSession(ctx context.Context, id string, req *lt.ForkRequest, webhookSecret string) (*lt.Session, error) {
	now := e.clock.Now()
	forkID, seeded, err := creationID(ctx, "ses_", now)
	if err != nil {
		return nil, err
	}
	if seeded && IsRerun(ctx) {
		// Made by an earlier run of the same request: answered as made
		// (its secret by the caller), before anything is checked again
		// (the space left on the disk included), its workspace left as
		// it is.
		if v, err := e.GetSession(ctx, forkID); !isNotFound(err) {
			return v, err
		}
	}
	if err := e.refuseWhenLow(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.CheckpointID) == "" {
		return nil, apierror.Invalid("checkpoint_id", "required: the checkpoint to fork from")
	}
	if req.Input != "" {
		if err := validateInput(req.Input, "input"); err != nil {
			return nil, err
		}
	}
	if req.WebhookURL != nil {
		if err := checkWebhookURL(*req.WebhookURL); err != nil {
			return nil, err
		}
	}
	row, err := e.store.SessionGet(ctx, id)
	if err != nil {
		return nil, notFound(err, "session", id)
	}
	cps, err := e.ListCheckpoints(ctx, id)
	if err != nil {
		return nil, err
	}
	var cp *lt.Checkpoint
	for i := range cps {
		if cps[i].ID == req.CheckpointID {
			cp = &cps[i]
		}
	}
	if cp == nil {
		return nil, apierror.NotFound("checkpoint %s not found in session %s", req.CheckpointID, id)
	}

	rn := &forkRenamer{from: id, to: forkID, owned: func() (map[string]bool, error) { return e.ownedIDs(ctx, id) }}
	var renameErr error
	rename := func(data []byte) []byte {
		out, err := rn.rename(data)
		if err != nil && renameErr == nil {
			renameErr = err
		}
		return out
	}
	renameID := func(s string) string {
		if s == "" {
			return ""
		}
		return strings.Trim(string(rename([]byte(`"`+s+`"`))), `"`)
	}

	st := &journal.State{}
	st.Session.ID = forkID
	b := e.newBatch(ctx, st, "")
	for after := int64(0); after < cp.EventSeq; {
		evs, err := e.store.EventList(ctx, id, after, int(min(1000, cp.EventSeq-after)))
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return nil, fmt.Errorf("fork %s: the journal ends before seq %d", id, cp.EventSeq)
		}
		for _, r := range evs {
			ev, err := e.fullEvent(ctx, wireEvent(r))
			if err != nil {
				return nil, err
			}
			ev.SessionID, ev.TurnID, ev.Data = forkID, renameID(ev.TurnID), rename(ev.Data)
			if renameErr != nil {
				return nil, renameErr
			}
			if err := journal.Apply(st, ev, &b.changes); err != nil {
				return nil, fmt.Errorf("fork %s: replay seq %d: %w", id, ev.Seq, err)
			}
			b.events = append(b.events, ev)
		}
		after = evs[len(evs)-1].Seq
	}
	if len(st.OpenEffects) > 0 || len(st.Pending) > 0 {
		return nil, apierror.Conflict("checkpoint %s was taken with effects or actions still open: fork from a checkpoint at the end of a step or turn", cp.ID)
	}
	if req.WebhookURL != nil {
		if err := forkWebhookURL(b, st, *req.WebhookURL); err != nil {
			return nil, err
		}
	}
	if err := b.add(lt.EventSessionForked, "", 0, lt.SessionForkedData{From: lt.ForkRef{SessionID: id, CheckpointID: cp.ID, EventSeq: cp.EventSeq}, Actor: b.actor()}); err != nil {
		return nil, err
	}
	if len(st.Turns) == 0 && !st.Session.Status.Terminal() {
		// A turn's checkpoint comes just before the session went idle.
		if err := b.status(lt.SessionIdle, ""); err != nil {
			return nil, err
		}
	}
	if req.Input != "" {
		turnID := newID("turn_", now)
		if err := b.add(lt.EventTurnCreated, turnID, 0, lt.TurnCreatedData{TurnID: turnID, Index: st.TurnCount + 1, Input: req.Input}); err != nil {
			return nil, err
		}
		if st.Session.Status.Terminal() {
			if err := b.status(lt.SessionQueued, ""); err != nil {
				return nil, err
			}
		}
	}
	if seeded {
		// Made meanwhile by a run of the same request that overlapped this
		// one (this run stalled past its claim's time): its workspace is
		// that fork's, perhaps at work already, and is not restored over.
		if v, err := e.GetSession(ctx, forkID); !isNotFound(err) {
			return v, err
		}
	}
	if cp.Snapshot != "" {
		if err := e.restoreFork(ctx, cmp.Or(row.Project, lt.DefaultProject), forkID, cp.Snapshot); err != nil {
			// Never the copy of a fork another run made meanwhile.
			made := false
			if seeded {
				_, gone := e.store.SessionGet(ctx, forkID)
				made = !isNotFound(gone)
			}
			if !made {
				_ = e.removeWorkspace(forkID)
			}
			return nil, err
		}
	}
	p, err := b.appendParams(0, nil, false)
	if err != nil {
		return nil, err
	}
	var hook *store.WebhookSessionRow
	if webhookSecret != "" {
		// The cursor is every target's, the server's endpoints too: none
		// hears the copied events as the fork's.
		hook = &store.WebhookSessionRow{Secret: webhookSecret, Cursor: cp.EventSeq}
	}
	_, err = e.store.SessionCreate(ctx, &store.SessionCreateParams{
		Session: store.SessionRow{
			ID: forkID, Project: row.Project, AgentName: row.AgentName, AgentVersion: row.AgentVersion, Status: string(st.Session.Status),
			Spec: row.Spec, State: p.State, Runnable: p.Runnable, CreatedAt: now, UpdatedAt: st.Session.UpdatedAt,
		},
		Events: p.Events, Docs: p.Docs, Blobs: p.Blobs, Webhook: hook,
	})
	if seeded && errors.Is(err, store.ErrConflict) {
		// Made by a run of the same request at the same time (a claim
		// taken over from a run that outlived it): the workspace is that
		// fork's now.
		return e.seededMade(ctx, forkID)
	}
	if err != nil {
		_ = e.removeWorkspace(forkID)
		return nil, err
	}
	v := st.View()
	if hook != nil && v.WebhookURL != "" {
		v.WebhookSecret = hook.Secret
	}
	return &v, nil
}

// forkWebhookURL sets where a fork's notifications go (url; "": nowhere)
// in its copy of its origin's session.created, which is where the
// notifications' dispatcher reads it, and in its state.
func forkWebhookURL(b *batch, st *journal.State, url string) error {
	if len(b.events) == 0 || b.events[0].Type != lt.EventSessionCreated {
		return apierror.Conflict("webhook_url: the journal of the session does not begin with its creation, which would say where its notifications go")
	}
	ev := &b.events[0]
	var created lt.SessionCreatedData
	if err := json.Unmarshal(ev.Data, &created); err != nil {
		return fmt.Errorf("fork: decode session.created: %w", err)
	}
	created.WebhookURL = url
	data, err := json.Marshal(created)
	if err != nil {
		return err
	}
	*ev = ev.WithPayload(nil)
	ev.Data = data
	st.Session.WebhookURL = url
	return nil
}

// forkRenamer gives a fork its own ids in the JSON it copies: the
// origin's id becomes the fork's, and every other id the origin owns a
// derived one. An id of the shapes the engine makes (idToken) is renamed
// as soon as it is seen; one of another shape (an import's) only if the
// origin owns a record of that id, which owned lists the first time such
// a string comes up (most journals have some: call ids, key ids, stop
// reasons). Only strings in a value's place are renamed: an owned id that
// happens to equal a key (an import may name a turn "turn_id") leaves the
// keys as they are, and so does an id that keys a map of a tool's output
// or a session's metadata (the engine's own payloads key none by id).
type forkRenamer struct {
	from, to string
	owned    func() (map[string]bool, error)
	ownedIDs map[string]bool // nil until owned ran
}

func (f *forkRenamer) rename(data []byte) ([]byte, error) {
	matches := idString.FindAllIndex(data, -1)
	if matches == nil {
		return data, nil
	}
	out := make([]byte, 0, len(data)+len(matches)*32)
	last := 0
	for _, m := range matches {
		old := string(data[m[0]+1 : m[1]-1])
		if isKey(data[m[1]:]) {
			continue
		}
		to := f.to
		if old != f.from {
			owned, err := f.owns(old)
			if err != nil {
				return data, err
			}
			if !owned {
				continue // a string of an id's shape that is not the origin's
			}
			to = derivedID(old[:strings.IndexByte(old, '_')+1], f.to, old)
		}
		out = append(out, data[last:m[0]+1]...)
		out = append(out, to...)
		last = m[1] - 1
	}
	return append(out, data[last:]...), nil
}

// owns reports whether id is one of the origin's records' ids: of the
// engine's shapes, or listed (owned, read once).
func (f *forkRenamer) owns(id string) (bool, error) {
	if idToken.MatchString(id) {
		return true, nil
	}
	if f.ownedIDs == nil {
		owned, err := f.owned()
		if err != nil {
			return false, err
		}
		f.ownedIDs = owned
	}
	return f.ownedIDs[id], nil
}

// isKey reports whether a JSON string followed by rest is an object's key.
func isKey(rest []byte) bool {
	for _, c := range rest {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}

// ownedIDs returns the ids of the records session id owns (its turns,
// actions, effects, artifacts and checkpoints), so that a fork renames
// them whatever their shape.
func (e *Engine) ownedIDs(ctx context.Context, id string) (map[string]bool, error) {
	owned := map[string]bool{}
	lists := []func() ([]*store.DocRow, error){
		func() ([]*store.DocRow, error) { return e.store.TurnList(ctx, id) },
		func() ([]*store.DocRow, error) { return e.store.ActionList(ctx, id, "") },
		func() ([]*store.DocRow, error) { return e.store.EffectList(ctx, id) },
		func() ([]*store.DocRow, error) { return e.store.ArtifactList(ctx, id) },
		func() ([]*store.DocRow, error) { return e.store.CheckpointList(ctx, id) },
	}
	for _, list := range lists {
		rows, err := list()
		if err != nil {
			return nil, fmt.Errorf("fork %s: list its records: %w", id, err)
		}
		for _, r := range rows {
			owned[r.ID] = true
		}
	}
	return owned, nil
}

// restoreFork makes the workspace of fork forkID (of project) the checkpoint's snapshot,
// through an Environment of its own, which notes the copy holds it (the
// fork's first tool call restores nothing again).
func (e *Engine) restoreFork(ctx context.Context, project, forkID, snap string) error {
	// In the project of the session forked (the fork's): the restore
	// refuses a snapshot the project does not own.
	env, err := e.envs.Open(ctx, &environment.OpenParams{
		Workspace: forkID, Session: forkID,
		Snapshot: snapshotLimits, Project: project,
	})
	if err != nil {
		return fmt.Errorf("fork workspace: %w", err)
	}
	defer env.Close()
	if _, err := env.Restore(ctx, snap); err != nil {
		return fmt.Errorf("restore the checkpoint's workspace: %w", err)
	}
	return nil
}

// fullEvent returns ev with a payload that was moved to a blob read back.
func (e *Engine) fullEvent(ctx context.Context, ev lt.Event) (lt.Event, error) {
	if len(ev.Data) == 0 || !bytes.HasPrefix(ev.Data, []byte(`{"blob":`)) {
		return ev, nil
	}
	var stub lt.BlobData
	if json.Unmarshal(ev.Data, &stub) != nil || len(stub.Blob.SHA256) != 64 {
		return ev, nil
	}
	data, err := e.store.BlobGet(ctx, stub.Blob.SHA256)
	if err != nil {
		return ev, fmt.Errorf("read blob of event %d: %w", ev.Seq, err)
	}
	ev.Data = data
	return ev, nil
}
