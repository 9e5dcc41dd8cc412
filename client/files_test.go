package client

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestFileMethods: the workspace file methods send what the API expects: the
// path segment by segment ("." and ".." escaped, so the server judges
// them), a checkpoint's routes, the upload's raw bytes as
// application/octet-stream with its action_id, and a download checked
// against its ETag.
func TestFileMethods(t *testing.T) {
	t.Parallel()
	content := []byte("a,b\n1,2\n")
	sum := sha256.Sum256(content)
	digest := hex.EncodeToString(sum[:])
	change := lt.WorkspaceChange{By: "person", Op: "write", Path: "in/data.csv", SHA256: digest, Size: int64(len(content)), Seq: 7}
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			if r.URL.Path == "/v1/sessions/ses_1/files" || r.URL.Path == "/v1/sessions/ses_1/checkpoints/ckpt_1/files" {
				writeJSON(w, http.StatusOK, lt.FileListing{Path: "in", Entries: []lt.FileEntry{{Name: "data.csv", Path: "in/data.csv", Type: "file"}}})
				return
			}
			w.Header().Set("ETag", `"`+digest+`"`)
			w.Header().Set("Content-Type", "application/octet-stream")
			if r.URL.Query().Get("bad") == "" && r.URL.Path != "/v1/sessions/ses_1/files/corrupt.csv" {
				_, _ = w.Write(content)
				return
			}
			_, _ = w.Write([]byte("other"))
		default:
			writeJSON(w, http.StatusOK, change)
		}
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)
	ctx := t.Context()

	l, err := c.ListFiles(ctx, "ses_1", "", "in")
	require.NoError(t, err)
	require.Equal(t, "in/data.csv", l.Entries[0].Path)
	_, err = c.ListFiles(ctx, "ses_1", "ckpt_1", "")
	require.NoError(t, err)
	data, err := c.GetFile(ctx, "ses_1", "", "in/data.csv")
	require.NoError(t, err)
	require.Equal(t, content, data)
	_, err = c.GetFile(ctx, "ses_1", "ckpt_1", "in/data.csv")
	require.NoError(t, err)
	_, err = c.GetFile(ctx, "ses_1", "", "corrupt.csv")
	require.ErrorContains(t, err, "does not match "+digest)
	ch, err := c.PutFile(ctx, "ses_1", "in/data.csv", content, "act_9")
	require.NoError(t, err)
	require.Equal(t, change, *ch)
	_, err = c.PutFile(ctx, "ses_1", "../up.txt", nil, "")
	require.NoError(t, err)
	_, err = c.DeleteFile(ctx, "ses_1", "in/my file.csv")
	require.NoError(t, err)

	reqs := rc.all()
	require.Len(t, reqs, 8)
	require.Equal(t, recorded{method: "GET", path: "/v1/sessions/ses_1/files", query: "path=in"}, stripped(reqs[0]))
	require.Equal(t, recorded{method: "GET", path: "/v1/sessions/ses_1/checkpoints/ckpt_1/files"}, stripped(reqs[1]))
	require.Equal(t, recorded{method: "GET", path: "/v1/sessions/ses_1/files/in/data.csv"}, stripped(reqs[2]))
	require.Equal(t, recorded{method: "GET", path: "/v1/sessions/ses_1/checkpoints/ckpt_1/files/in/data.csv"}, stripped(reqs[3]))
	put := reqs[5]
	require.Equal(t, recorded{method: "PUT", path: "/v1/sessions/ses_1/files/in/data.csv", query: "action_id=act_9", body: string(content)}, stripped(put))
	require.Equal(t, "application/octet-stream", put.header.Get("Content-Type"))
	require.Empty(t, put.header.Get("Idempotency-Key"), "a PUT is idempotent by nature")
	require.Equal(t, "/v1/sessions/ses_1/files/%2E%2E/up.txt", reqs[6].path, "the server sees the .. it must refuse")
	require.Equal(t, "application/octet-stream", reqs[6].header.Get("Content-Type"))
	require.Equal(t, recorded{method: "DELETE", path: "/v1/sessions/ses_1/files/in/my%20file.csv"}, stripped(reqs[7]))

	_, err = c.PutFile(ctx, "", "a.txt", nil, "")
	require.Error(t, err)
	_, err = c.GetFile(ctx, "ses_1", "", "/")
	require.ErrorContains(t, err, "path is empty")
}

// stripped is a recorded request without its headers.
func stripped(r recorded) recorded {
	r.header = nil
	return r
}
