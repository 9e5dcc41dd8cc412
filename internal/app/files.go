package app

import (
	"context"
	"io"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListFiles implements Service.
func (a *App) ListFiles(ctx context.Context, sessionID, checkpointID, dir string) (*lt.FileListing, error) {
	if err := Allow(ctx, "ListFiles"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	if checkpointID != "" {
		return a.eng.ListCheckpointFiles(ctx, sessionID, checkpointID, dir)
	}
	return a.eng.ListFiles(ctx, sessionID, dir)
}

// OpenFile implements Service.
func (a *App) OpenFile(ctx context.Context, sessionID, checkpointID, path string) (*lt.FileEntry, io.ReadCloser, error) {
	if err := Allow(ctx, "OpenFile"); err != nil {
		return nil, nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, nil, err
	}
	if checkpointID != "" {
		return a.eng.OpenCheckpointFile(ctx, sessionID, checkpointID, path)
	}
	return a.eng.OpenFile(ctx, sessionID, path)
}

// PutFileIfMatch implements Service.
func (a *App) PutFileIfMatch(ctx context.Context, sessionID, path string, data []byte, actionID, ifMatch string) (*lt.WorkspaceChange, error) {
	if err := Allow(ctx, "PutFileIfMatch"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.WriteFileIfMatch(ctx, sessionID, path, data, actionID, ifMatch)
}

// DeleteFileIfMatch implements Service.
func (a *App) DeleteFileIfMatch(ctx context.Context, sessionID, path, ifMatch string) (*lt.WorkspaceChange, error) {
	if err := Allow(ctx, "DeleteFileIfMatch"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.DeleteFileIfMatch(ctx, sessionID, path, ifMatch)
}
