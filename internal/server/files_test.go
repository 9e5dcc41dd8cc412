package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (h *harness) put(path string, body []byte, contentType string, header map[string]string) *response {
	h.t.Helper()
	hd := map[string]string{"Content-Type": contentType}
	for k, v := range header {
		hd[k] = v
	}
	return h.do(http.MethodPut, path, body, hd)
}

// TestWorkspaceFilesAPI: the listing, the download (octet-stream, as an
// attachment, its sha256 as ETag), an upload and a delete of an idle
// session's files, both journaled as workspace.changed by a person, and a
// checkpoint's snapshot read; 404s for unknown sessions, paths and
// checkpoints, 400 for a directory read as a file.
func TestWorkspaceFilesAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.createSession("notes")
	h.waitStatus(s.ID, lt.SessionIdle)
	base := "/v1/sessions/" + s.ID

	r := h.get(base + "/files")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	l := decode[lt.FileListing](t, r)
	require.Equal(t, ".", l.Path)
	require.True(t, l.Writable)
	require.Len(t, l.Entries, 1)
	notes := "# Notes\n\nhello"
	require.Equal(t, "notes.md", l.Entries[0].Path)
	require.Equal(t, hexSHA256([]byte(notes)), l.Entries[0].SHA256)

	r = h.get(base + "/files/notes.md")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, notes, string(r.body))
	require.Equal(t, "application/octet-stream", r.header.Get("Content-Type"))
	require.Equal(t, "attachment; filename=notes.md", r.header.Get("Content-Disposition"))
	require.Equal(t, strconv.Quote(hexSHA256([]byte(notes))), r.header.Get("ETag"))
	require.Equal(t, "sandbox", r.header.Get("Content-Security-Policy"))

	body := []byte("data from a person\x00\xff") // any bytes, not only text
	r = h.put(base+"/files/in/data.bin", body, "application/octet-stream", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	ch := decode[lt.WorkspaceChange](t, r)
	local := &lt.Actor{Name: "local", Role: lt.RoleAdmin} // the loopback caller of a server without keys
	require.Equal(t, lt.WorkspaceChange{By: "person", Actor: local, Op: "write", Path: "in/data.bin", SHA256: hexSHA256(body), Size: int64(len(body)), Seq: ch.Seq}, ch)
	r = h.get(base + "/files/in/data.bin")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, body, r.body)
	r = h.get(base + "/files?path=in")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, "in/data.bin", decode[lt.FileListing](t, r).Entries[0].Path)

	r = h.do(http.MethodDelete, base+"/files/notes.md", nil, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, "delete", decode[lt.WorkspaceChange](t, r).Op)
	requireError(t, h.do(http.MethodDelete, base+"/files/notes.md", nil, nil), http.StatusNotFound, lt.CodeNotFound, "path")
	requireError(t, h.get(base+"/files/notes.md"), http.StatusNotFound, lt.CodeNotFound, "path")
	requireError(t, h.get(base+"/files/in"), http.StatusBadRequest, lt.CodeInvalidRequest, "path")
	requireError(t, h.get(base+"/files?path=in/data.bin"), http.StatusBadRequest, lt.CodeInvalidRequest, "path")
	requireError(t, h.get(base+"/files?path=../x"), http.StatusBadRequest, lt.CodeInvalidRequest, "path")
	requireError(t, h.get(base+"/files/%2E%2E%2Fsecret"), http.StatusBadRequest, lt.CodeInvalidRequest, "path")
	requireError(t, h.get("/v1/sessions/ses_unknown/files"), http.StatusNotFound, lt.CodeNotFound, "")
	requireError(t, h.put("/v1/sessions/ses_unknown/files/a.txt", []byte("x"), "application/octet-stream", nil), http.StatusNotFound, lt.CodeNotFound, "")

	// Both changes are in the journal, by a person.
	var changed []lt.WorkspaceChange
	for _, raw := range h.allEvents(s.ID, 100) {
		var ev lt.Event
		require.NoError(t, json.Unmarshal(raw, &ev))
		if ev.Type == lt.EventWorkspaceChanged {
			var d lt.WorkspaceChange
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			changed = append(changed, d)
		}
	}
	require.Len(t, changed, 2)
	require.Equal(t, "in/data.bin", changed[0].Path)
	require.Equal(t, "person", changed[1].By)
	require.Equal(t, "notes.md", changed[1].Path)

	// A checkpoint's snapshot still holds notes.md.
	r = h.get(base + "/checkpoints")
	require.Equal(t, http.StatusOK, r.status)
	cps := decode[lt.List[lt.Checkpoint]](t, r).Data
	require.NotEmpty(t, cps)
	cp := cps[len(cps)-1]
	r = h.get(base + "/checkpoints/" + cp.ID + "/files")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	cl := decode[lt.FileListing](t, r)
	require.Equal(t, cp.ID, cl.CheckpointID)
	require.False(t, cl.Writable)
	require.Equal(t, "notes.md", cl.Entries[0].Path)
	r = h.get(base + "/checkpoints/" + cp.ID + "/files/notes.md")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, notes, string(r.body))
	require.Equal(t, "application/octet-stream", r.header.Get("Content-Type"))
	requireError(t, h.get(base+"/checkpoints/ckpt_unknown/files"), http.StatusNotFound, lt.CodeNotFound, "")
	requireError(t, h.get(base+"/checkpoints/"+cp.ID+"/files/missing.md"), http.StatusNotFound, lt.CodeNotFound, "path")
	// Snapshots are read only: no write route, and no exception to the
	// JSON rule for one.
	requireError(t, h.put(base+"/checkpoints/"+cp.ID+"/files/notes.md", []byte("x"), "application/octet-stream", nil), http.StatusForbidden, lt.CodeForbidden, "Content-Type")
	require.Equal(t, http.StatusMethodNotAllowed, h.do(http.MethodDelete, base+"/checkpoints/"+cp.ID+"/files/notes.md", nil, nil).status)
}

// TestFileUploadContentType: the upload route, and only it, takes
// application/octet-stream, and no other type; the cross-site rule still
// applies to it.
func TestFileUploadContentType(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.createSession("notes")
	h.waitStatus(s.ID, lt.SessionIdle)
	path := "/v1/sessions/" + s.ID + "/files/a.txt"
	for _, ct := range []string{"application/json", "text/plain", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded", ""} {
		r := h.put(path, []byte(`{"a":1}`), ct, nil)
		requireError(t, r, http.StatusForbidden, lt.CodeForbidden, "Content-Type")
	}
	// The exception is this route's alone.
	r := h.do(http.MethodPost, "/v1/sessions/"+s.ID+"/turns", []byte(`{"input":"x"}`), map[string]string{"Content-Type": "application/octet-stream"})
	requireError(t, r, http.StatusForbidden, lt.CodeForbidden, "Content-Type")
	// Cross-site uploads are refused like any other write.
	r = h.put(path, []byte("x"), "application/octet-stream", map[string]string{"Origin": "https://evil.example"})
	requireError(t, r, http.StatusForbidden, lt.CodeForbidden, "Origin")
	r = h.put(path, []byte("x"), "application/octet-stream", map[string]string{"Sec-Fetch-Site": "cross-site"})
	requireError(t, r, http.StatusForbidden, lt.CodeForbidden, "Sec-Fetch-Site")
	requireError(t, h.get("/v1/sessions/"+s.ID+"/files/a.txt"), http.StatusNotFound, lt.CodeNotFound, "path")
	// The same origin may.
	r = h.put(path, []byte("x"), "application/octet-stream; charset=binary", map[string]string{"Origin": h.ts.URL})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
}

// TestFileUploadLimits: an upload has its own limit (above the JSON
// bodies'), 413 over it; a JSON body keeps its limit.
func TestFileUploadLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{cfg: &server.Config{MaxBodyBytes: 1024, MaxFileBytes: 4096}})
	s := h.createSession("notes")
	h.waitStatus(s.ID, lt.SessionIdle)
	path := "/v1/sessions/" + s.ID + "/files/big.txt"
	r := h.put(path, []byte(strings.Repeat("a", 3000)), "application/octet-stream", nil)
	require.Equal(t, http.StatusOK, r.status, "over the JSON limit, within the file limit: body: %s", r.body)
	r = h.put(path, []byte(strings.Repeat("b", 5000)), "application/octet-stream", nil)
	requireError(t, r, http.StatusRequestEntityTooLarge, lt.CodePayloadTooLarge, "")
	r = h.post("/v1/sessions/"+s.ID+"/constraints", `{"constraint":"`+strings.Repeat("c", 3000)+`"}`)
	requireError(t, r, http.StatusRequestEntityTooLarge, lt.CodePayloadTooLarge, "")
	r = h.get("/v1/sessions/" + s.ID + "/files/big.txt")
	require.Equal(t, strings.Repeat("a", 3000), string(r.body), "the refused upload changed nothing")
}

// TestFileWriteWhileRunningIs409: a running session's workspace cannot be
// changed.
func TestFileWriteWhileRunningIs409(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	r := h.post("/v1/sessions", `{"agent_spec":{"model":{"provider":"scripted","script":[{"delay_ms":600000,"text":"never"}]}},"input":"wait"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	s := decode[lt.Session](t, r)
	h.waitStatus(s.ID, lt.SessionRunning)
	r = h.put("/v1/sessions/"+s.ID+"/files/a.txt", []byte("x"), "application/octet-stream", nil)
	requireError(t, r, http.StatusConflict, lt.CodeConflict, "")
	r = h.do(http.MethodDelete, "/v1/sessions/"+s.ID+"/files/a.txt", nil, nil)
	requireError(t, r, http.StatusConflict, lt.CodeConflict, "")
	r = h.get("/v1/sessions/" + s.ID + "/files")
	require.Equal(t, http.StatusOK, r.status)
	require.False(t, decode[lt.FileListing](t, r).Writable)
	require.Equal(t, http.StatusOK, h.post("/v1/sessions/"+s.ID+"/cancel", `{}`).status)
	h.waitStatus(s.ID, lt.SessionCancelled)
}
