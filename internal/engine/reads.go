package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListEvents returns up to limit events of a session after seq after.
func (e *Engine) ListEvents(ctx context.Context, sessionID string, after int64, limit int) ([]lt.Event, error) {
	if _, err := e.store.SessionGet(ctx, sessionID); err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	rows, err := e.store.EventList(ctx, sessionID, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]lt.Event, len(rows))
	for i, r := range rows {
		out[i] = wireEvent(r)
	}
	return out, nil
}

func wireEvent(r store.Event) lt.Event {
	return lt.Event{Seq: r.Seq, Type: r.Type, Time: r.Time, SessionID: r.SessionID, TurnID: r.TurnID, Step: r.Step, WorkerID: r.WorkerID, Data: r.Data}
}

// WatchSession notifies of journal growth until stop is called or ctx ends.
func (e *Engine) WatchSession(ctx context.Context, sessionID string) (<-chan int64, func()) {
	ch, stop := e.hub.watch(sessionID)
	return ch, stopWhenDone(ctx, stop)
}

// WatchSessionGrowth is WatchSession with the session's status after each
// notice's commit, so that a waiter for a status (a session's end, its
// turn's) reads the session only when a notice does not say it (one from
// another node): a step's notice costs no read of a row that the append
// that caused it has just written.
func (e *Engine) WatchSessionGrowth(ctx context.Context, sessionID string) (<-chan SessionGrowth, func()) {
	ch, stop := e.hub.watchGrowth(sessionID)
	return ch, stopWhenDone(ctx, stop)
}

// stopWhenDone calls stop when ctx ends, and returns stop for the caller
// to call before.
func stopWhenDone(ctx context.Context, stop func()) func() {
	unregister := context.AfterFunc(ctx, stop)
	return func() {
		unregister()
		stop()
	}
}

// ListEffects returns the session's side-effect ledger.
// They come in the order they started (a store lists them by id).
func (e *Engine) ListEffects(ctx context.Context, sessionID string) ([]lt.Effect, error) {
	effects, err := listDocs[lt.Effect](ctx, e, sessionID, e.store.EffectList)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(effects, func(i, j int) bool {
		a, b := &effects[i], &effects[j]
		if !a.StartedAt.Equal(b.StartedAt) {
			return a.StartedAt.Before(b.StartedAt)
		}
		if a.Step != b.Step {
			return a.Step < b.Step
		}
		return a.CallIndex < b.CallIndex
	})
	return effects, nil
}

// ListCheckpoints returns the session's checkpoints.
// They come in journal order.
func (e *Engine) ListCheckpoints(ctx context.Context, sessionID string) ([]lt.Checkpoint, error) {
	cps, err := listDocs[lt.Checkpoint](ctx, e, sessionID, e.store.CheckpointList)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(cps, func(i, j int) bool { return cps[i].EventSeq < cps[j].EventSeq })
	return cps, nil
}

// ListArtifacts returns the session's artifacts.
func (e *Engine) ListArtifacts(ctx context.Context, sessionID string) ([]lt.Artifact, error) {
	return listDocs[lt.Artifact](ctx, e, sessionID, e.store.ArtifactList)
}

func listDocs[T any](ctx context.Context, e *Engine, sessionID string, list func(context.Context, string) ([]*store.DocRow, error)) ([]T, error) {
	if _, err := e.store.SessionGet(ctx, sessionID); err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	rows, err := list(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return decodeDocs[T](rows)
}

// GetArtifact returns an artifact's metadata.
func (e *Engine) GetArtifact(ctx context.Context, artifactID string) (*lt.Artifact, error) {
	row, err := e.store.ArtifactGet(ctx, artifactID)
	if err != nil {
		return nil, notFound(err, "artifact", artifactID)
	}
	var a lt.Artifact
	if err := json.Unmarshal(row.Doc, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ArtifactContent returns an artifact and its bytes.
func (e *Engine) ArtifactContent(ctx context.Context, artifactID string) (*lt.Artifact, []byte, error) {
	a, err := e.GetArtifact(ctx, artifactID)
	if err != nil {
		return nil, nil, err
	}
	data, err := e.store.BlobGet(ctx, a.SHA256)
	if err != nil {
		return nil, nil, fmt.Errorf("read artifact %s content: %w", artifactID, err)
	}
	return a, data, nil
}

// GetBlob returns a content-addressed blob (large event payloads).
func (e *Engine) GetBlob(ctx context.Context, sha256Hex string) ([]byte, error) {
	if len(sha256Hex) != 64 {
		return nil, apierror.Invalid("sha256", "must be 64 hex digits")
	}
	data, err := e.store.BlobGet(ctx, sha256Hex)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierror.NotFound("blob %s not found", sha256Hex)
	}
	return data, err
}

// Ready reports whether storage is reachable and migrated, and whether the
// engine is accepting work.
func (e *Engine) Ready(ctx context.Context) error {
	if e.isDraining() {
		return apierror.Unavailable("server is shutting down")
	}
	if err := e.store.Ping(ctx); err != nil {
		return apierror.Unavailable("storage: %v", err)
	}
	if err := e.checkSpace(); err != nil {
		ae := apierror.Unavailable("%v", err)
		ae.Cause = err
		return ae
	}
	return nil
}
