package longhaul

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A session's workspace as a person taking over sees it: the in-process
// counterparts of the client's file calls, with their signatures. A path is
// relative to the workspace's root; checkpointID, where a call takes one,
// reads that checkpoint's snapshot instead of the live workspace.

// ListFiles lists directory dir ("" for the root) of the session's
// workspace, or of checkpointID's snapshot when it is not empty.
func (rt *Runtime) ListFiles(ctx context.Context, sessionID, checkpointID, dir string) (*lt.FileListing, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	l, err := rt.svc.ListFiles(asLibrary(ctx), sessionID, checkpointID, dir)
	if err != nil {
		return nil, fmt.Errorf("list files of %s: %w", sessionID, apiError(err))
	}
	return l, nil
}

// GetFile returns the bytes of a file of the session's workspace, or of
// checkpointID's snapshot when it is not empty.
func (rt *Runtime) GetFile(ctx context.Context, sessionID, checkpointID, path string) (_ []byte, err error) {
	if err := requirePath(sessionID, path); err != nil {
		return nil, fmt.Errorf("get file: %w", err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("get file %s of %s: %w", path, sessionID, err)
		}
	}()
	_, r, err := rt.svc.OpenFile(asLibrary(ctx), sessionID, checkpointID, path)
	if err != nil {
		return nil, apiError(err)
	}
	data, err := io.ReadAll(r)
	return data, errors.Join(err, r.Close())
}

// PutFile writes data to path in the session's workspace, a person's
// change. actionID, when not empty, names the pending input action of kind
// "file" the upload answers. A conflict unless the session is paused,
// idle, waiting or requires_action.
func (rt *Runtime) PutFile(ctx context.Context, sessionID, path string, data []byte, actionID string) (*lt.WorkspaceChange, error) {
	return rt.PutFileIfMatch(ctx, sessionID, path, data, actionID, "")
}

// PutFileIfMatch is PutFile made only while the file holds the bytes of
// SHA-256 ifSHA256 ("*": while it exists; "": unconditional); otherwise a
// conflict naming If-Match, and nothing changes.
func (rt *Runtime) PutFileIfMatch(ctx context.Context, sessionID, path string, data []byte, actionID, ifSHA256 string) (*lt.WorkspaceChange, error) {
	if err := requirePath(sessionID, path); err != nil {
		return nil, fmt.Errorf("put file: %w", err)
	}
	ch, err := rt.svc.PutFileIfMatch(asLibrary(ctx), sessionID, path, data, actionID, ifMatch(ifSHA256))
	if err != nil {
		return nil, fmt.Errorf("put file %s of %s: %w", path, sessionID, apiError(err))
	}
	return ch, nil
}

// DeleteFile deletes a file (or a symlink) of the session's workspace.
func (rt *Runtime) DeleteFile(ctx context.Context, sessionID, path string) (*lt.WorkspaceChange, error) {
	return rt.DeleteFileIfMatch(ctx, sessionID, path, "")
}

// DeleteFileIfMatch is DeleteFile on the condition PutFileIfMatch says.
func (rt *Runtime) DeleteFileIfMatch(ctx context.Context, sessionID, path, ifSHA256 string) (*lt.WorkspaceChange, error) {
	if err := requirePath(sessionID, path); err != nil {
		return nil, fmt.Errorf("delete file: %w", err)
	}
	ch, err := rt.svc.DeleteFileIfMatch(asLibrary(ctx), sessionID, path, ifMatch(ifSHA256))
	if err != nil {
		return nil, fmt.Errorf("delete file %s of %s: %w", path, sessionID, apiError(err))
	}
	return ch, nil
}

// requirePath checks what the client checks before it builds a file's
// URL: a session, and a path that names something under the root (the
// root itself is ListFiles').
func requirePath(sessionID, path string) error {
	if err := requireID("sessionID", sessionID); err != nil {
		return err
	}
	if strings.Trim(path, "/") == "" {
		return errors.New("path is empty")
	}
	return nil
}

// ifMatch is the condition as the service takes it, the value of an
// If-Match header (the HTTP API hands the service the header as sent, a
// list of tags included): the SHA-256 quoted, as the client sends it; "*"
// and "" as they are.
func ifMatch(sha256Hex string) string {
	if sha256Hex == "" || sha256Hex == "*" {
		return sha256Hex
	}
	return strconv.Quote(sha256Hex)
}
