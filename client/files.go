package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// filesURL is the URL of a session's workspace file (or, with a checkpoint,
// of its snapshot's): each segment of the workspace-relative path is
// escaped on its own, so "a/b.txt" stays a path, and a "." or ".." segment
// is sent escaped, so that no URL resolution drops it on the way and the
// server judges the path the caller gave (a 400 naming path).
func (c *Client) filesURL(query url.Values, sessionID, checkpointID, path string) string {
	base := []string{"v1", "sessions", sessionID}
	if checkpointID != "" {
		base = append(base, "checkpoints", checkpointID)
	}
	base = append(base, "files")
	u := c.endpoint(nil, base...)
	var b strings.Builder
	b.WriteString(u)
	if p := strings.Trim(path, "/"); p != "" {
		for _, seg := range strings.Split(p, "/") {
			b.WriteByte('/')
			if seg == "." || seg == ".." {
				b.WriteString(strings.ReplaceAll(seg, ".", "%2E"))
				continue
			}
			b.WriteString(url.PathEscape(seg))
		}
	}
	if len(query) > 0 {
		b.WriteByte('?')
		b.WriteString(query.Encode())
	}
	return b.String()
}

// ListFiles lists directory dir ("" for the root) of the session's
// workspace (GET /v1/sessions/{id}/files?path=DIR), or of checkpointID's
// snapshot when it is not empty
// (GET /v1/sessions/{id}/checkpoints/{checkpoint_id}/files?path=DIR).
func (c *Client) ListFiles(ctx context.Context, sessionID, checkpointID, dir string) (*lt.FileListing, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	var q url.Values
	if dir != "" {
		q = url.Values{"path": {dir}}
	}
	l, err := get[lt.FileListing](ctx, c, c.filesURL(q, sessionID, checkpointID, ""))
	if err != nil {
		return nil, fmt.Errorf("list files of %s: %w", sessionID, err)
	}
	return l, nil
}

// GetFile returns the bytes of a file of the session's workspace
// (GET /v1/sessions/{id}/files/{path}), or of checkpointID's snapshot when
// it is not empty. The bytes are checked against the SHA-256 the server
// sends as ETag: a corrupted or truncated download is an error.
func (c *Client) GetFile(ctx context.Context, sessionID, checkpointID, path string) ([]byte, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("get file: %w", err)
	}
	if strings.Trim(path, "/") == "" {
		return nil, fmt.Errorf("get file: path is empty")
	}
	resp, err := c.send(ctx, &call{method: http.MethodGet, url: c.filesURL(nil, sessionID, checkpointID, path), accept: "*/*"})
	if err != nil {
		return nil, fmt.Errorf("get file %s of %s: %w", path, sessionID, err)
	}
	if want, ok := etagSHA256(resp.header.Get("ETag")); ok {
		if err := checkSHA256(resp.body, want); err != nil {
			return nil, fmt.Errorf("get file %s of %s: %w", path, sessionID, err)
		}
	}
	return resp.body, nil
}

// PutFile writes data to path in the session's workspace, a person's
// change (PUT /v1/sessions/{id}/files/{path}, application/octet-stream).
// actionID, when not empty, names the pending input action of kind "file"
// the upload answers. 409 unless the session is paused, idle, waiting or
// requires_action.
func (c *Client) PutFile(ctx context.Context, sessionID, path string, data []byte, actionID string) (*lt.WorkspaceChange, error) {
	return c.PutFileIfMatch(ctx, sessionID, path, data, actionID, "")
}

// PutFileIfMatch is PutFile made only while the file holds the bytes of
// SHA-256 ifSHA256 ("*": while it exists; "": unconditional); otherwise a
// 409 naming If-Match, and nothing changes. An edit of a downloaded file
// names the digest it read, so it never overwrites, unseen, a change made
// since.
func (c *Client) PutFileIfMatch(ctx context.Context, sessionID, path string, data []byte, actionID, ifSHA256 string) (*lt.WorkspaceChange, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("put file: %w", err)
	}
	if strings.Trim(path, "/") == "" {
		return nil, fmt.Errorf("put file: path is empty")
	}
	var q url.Values
	if actionID != "" {
		q = url.Values{"action_id": {actionID}}
	}
	if data == nil {
		data = []byte{}
	}
	out := new(lt.WorkspaceChange)
	if err := c.doJSON(ctx, &call{method: http.MethodPut, url: c.filesURL(q, sessionID, "", path), raw: data, rawType: "application/octet-stream", ifMatch: ifMatchHeader(ifSHA256)}, out); err != nil {
		return nil, fmt.Errorf("put file %s of %s: %w", path, sessionID, err)
	}
	return out, nil
}

// DeleteFile deletes a file (or a symlink) of the session's workspace
// (DELETE /v1/sessions/{id}/files/{path}).
func (c *Client) DeleteFile(ctx context.Context, sessionID, path string) (*lt.WorkspaceChange, error) {
	return c.DeleteFileIfMatch(ctx, sessionID, path, "")
}

// DeleteFileIfMatch is DeleteFile on the condition PutFileIfMatch says.
func (c *Client) DeleteFileIfMatch(ctx context.Context, sessionID, path, ifSHA256 string) (*lt.WorkspaceChange, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("delete file: %w", err)
	}
	if strings.Trim(path, "/") == "" {
		return nil, fmt.Errorf("delete file: path is empty")
	}
	out := new(lt.WorkspaceChange)
	if err := c.doJSON(ctx, &call{method: http.MethodDelete, url: c.filesURL(nil, sessionID, "", path), ifMatch: ifMatchHeader(ifSHA256)}, out); err != nil {
		return nil, fmt.Errorf("delete file %s of %s: %w", path, sessionID, err)
	}
	return out, nil
}

// ifMatchHeader is the If-Match value naming a file's SHA-256 ("*" as is).
func ifMatchHeader(sha string) string {
	if sha == "" || sha == "*" {
		return sha
	}
	return strconv.Quote(sha)
}
