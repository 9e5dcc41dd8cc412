package app

import (
	"context"
	"strconv"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListEvents implements Service.
func (a *App) ListEvents(ctx context.Context, sessionID string, after int64, limit int) (*lt.List[lt.Event], error) {
	if err := Allow(ctx, "ListEvents"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	if after < 0 {
		return nil, apierror.Invalid("after", "after must be 0 or more, got %d", after)
	}
	if limit < 0 || limit > MaxListLimit {
		return nil, apierror.Invalid("limit", "limit must be between 0 (the default page, %d) and %d, got %d", DefaultListLimit, MaxListLimit, limit)
	}
	if limit == 0 {
		limit = DefaultListLimit
	}
	evs, err := a.eng.ListEvents(ctx, sessionID, after, limit)
	if err != nil {
		return nil, err
	}
	page := list(evs)
	if len(evs) == limit {
		next := strconv.FormatInt(evs[len(evs)-1].Seq, 10)
		page.NextCursor = &next
	}
	return page, nil
}

// SessionTrace implements Service.
func (a *App) SessionTrace(ctx context.Context, id string, includeSubagents bool) (*lt.Trace, error) {
	if err := Allow(ctx, "SessionTrace"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, id); err != nil {
		return nil, err
	}
	return a.eng.SessionTrace(ctx, id, includeSubagents)
}

// ListEffects implements Service.
func (a *App) ListEffects(ctx context.Context, sessionID string) (*lt.List[lt.Effect], error) {
	if err := Allow(ctx, "ListEffects"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	effects, err := a.eng.ListEffects(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return list(effects), nil
}

// GetEffect implements Service.
func (a *App) GetEffect(ctx context.Context, sessionID, effectID string) (*lt.Effect, error) {
	if err := Allow(ctx, "GetEffect"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.GetEffect(ctx, sessionID, effectID)
}

// ListCheckpoints implements Service.
func (a *App) ListCheckpoints(ctx context.Context, sessionID string) (*lt.List[lt.Checkpoint], error) {
	if err := Allow(ctx, "ListCheckpoints"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	cps, err := a.eng.ListCheckpoints(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return list(cps), nil
}

// ListArtifacts implements Service.
func (a *App) ListArtifacts(ctx context.Context, sessionID string) (*lt.List[lt.Artifact], error) {
	if err := Allow(ctx, "ListArtifacts"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	arts, err := a.eng.ListArtifacts(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return list(arts), nil
}

// GetArtifact implements Service.
func (a *App) GetArtifact(ctx context.Context, id string) (*lt.Artifact, error) {
	if err := Allow(ctx, "GetArtifact"); err != nil {
		return nil, err
	}
	return a.visibleArtifact(ctx, id)
}

// ArtifactContent implements Service.
func (a *App) ArtifactContent(ctx context.Context, id string) (*lt.Artifact, []byte, error) {
	if err := Allow(ctx, "ArtifactContent"); err != nil {
		return nil, nil, err
	}
	if _, err := a.visibleArtifact(ctx, id); err != nil {
		return nil, nil, err
	}
	return a.eng.ArtifactContent(ctx, id)
}

// visibleArtifact returns the artifact if the caller may see its session;
// one of another project is as unknown as an artifact that never existed
// (the engine's 404).
func (a *App) visibleArtifact(ctx context.Context, id string) (*lt.Artifact, error) {
	art, err := a.eng.GetArtifact(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := a.seenThrough(ctx, art.SessionID, apierror.NotFound("artifact %s not found", id)); err != nil {
		return nil, err
	}
	return art, nil
}

// GetBlob implements Service. Blobs are shared by content across sessions
// and projects; a caller confined to a project may read one only if a
// session of its project wrote it (an event payload moved to a blob, an
// artifact's content, an upload): else it is as unknown as a blob never
// stored (the engine's 404), so a digest learnt elsewhere cannot probe
// another project's data. A snapshot's blobs are in no project: their
// files are read through the workspace's routes.
func (a *App) GetBlob(ctx context.Context, sha256Hex string) ([]byte, error) {
	if err := Allow(ctx, "GetBlob"); err != nil {
		return nil, err
	}
	if s := scopeOf(ctx); !s.all && len(sha256Hex) == 64 {
		// (A digest of another length is the engine's 400, as for anyone.)
		in, err := a.store.BlobInProject(ctx, sha256Hex, s.project)
		if err != nil {
			return nil, err
		}
		if !in {
			return nil, apierror.NotFound("blob %s not found", sha256Hex)
		}
	}
	return a.eng.GetBlob(ctx, sha256Hex)
}
