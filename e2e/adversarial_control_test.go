package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The adversarial cases of taking over the workspace (API.md "Cancel,
// steer, pause, take over"): a prompt-injected model plants symlinks, FIFOs
// and huge sparse files in its workspace while it waits for a person, and
// a hostile page or API caller sends the person's requests. Each asserts
// from outside: the HTTP answers and the host's file system.

// controlLookup is a function tool the scripted model calls to park the
// session on a required action (requires_action), the state in which a
// person changes the workspace.
var controlLookup = lt.ToolSpec{Name: "lookup", Type: "function", Parameters: json.RawMessage(`{"type":"object","additionalProperties":false}`)}

// controlParked starts a session whose model runs the shell command, then
// calls lookup, and waits until it is parked on that call.
func controlParked(ctx context.Context, t *testing.T, srv *server, command string) string {
	t.Helper()
	return controlParkedIn(ctx, t, srv, command, nil)
}

// controlParkedIn is controlParked with the agent's environment env.
func controlParkedIn(ctx context.Context, t *testing.T, srv *server, command string, env *lt.Environment) string {
	t.Helper()
	spec := diskSpec(attackScript(t, shellStep(command), toolCalls(toolCall("lookup", map[string]any{})), finalText("done")),
		lt.ToolSpec{Name: "shell"}, controlLookup)
	spec.Environment = env
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "prepare the files", AgentSpec: spec})
	require.NoError(t, err)
	waitStatus(ctx, t, srv, sess.ID, 60*time.Second, lt.SessionRequiresAction)
	return sess.ID
}

// controlRaw sends one request with the headers given (no retries) and
// returns the status and the body; the client gives up after timeout.
func controlRaw(t *testing.T, srv *server, timeout time.Duration, method, path string, body []byte, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.url+path, strings.NewReader(string(body)))
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestAdversarialControl_HugeSparseFilesListedAtOnce: the model fills its
// workspace with sparse files of many GiB (instant to make, no disk used,
// each at the sandbox's file size limit) before it parks. Listing the
// workspace, which the web UI's file browser does on every visit, must
// not read them through: it answers at once, naming each file, without a
// digest for those too large to hash on a listing.
func TestAdversarialControl_HugeSparseFilesListedAtOnce(t *testing.T) {
	t.Parallel()
	needTools(t, "a model's sparse files", "truncate")
	ctx := t.Context()
	srv := startServer(t)
	// 200 GiB of apparent size: a quota counts a sparse file at its size,
	// so the session's quota (1 TiB) holds them all, or the quota's
	// monitor would stop the command after as many as it made before its
	// first measure (fewer on a busy machine).
	id := controlParkedIn(ctx, t, srv, `echo small > small.txt; truncate -s 1G $(seq -f big%g.bin 1 200); ls | wc -l`,
		&lt.Environment{DiskMB: 1 << 20})

	start := time.Now()
	status, body := controlRaw(t, srv, 20*time.Second, http.MethodGet, "/v1/sessions/"+id+"/files", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Less(t, time.Since(start), 10*time.Second, "the listing read the sparse files through")
	var l lt.FileListing
	require.NoError(t, json.Unmarshal([]byte(body), &l))
	require.Equal(t, 201, l.Total)
	for _, e := range l.Entries {
		if e.Name == "small.txt" {
			require.NotEmpty(t, e.SHA256, "a small file's digest is listed")
			continue
		}
		require.Equal(t, int64(1<<30), e.Size, e.Name)
		require.Empty(t, e.SHA256, "%s: no digest of a huge file on a listing", e.Name)
	}
}

// TestAdversarialControl_PlantedSymlinksLeadNowhere: the model plants
// symlinks to the host's /etc/shadow, to /etc, to the server's data
// directory and up out of its workspace, and a FIFO, then parks. A
// person's reads, writes and deletes through them never leave the
// workspace: a read is a 400 naming path and shows none of the target's
// bytes, a write lands nowhere, a delete removes the link and never its
// target, and a FIFO does not hang a read.
func TestAdversarialControl_PlantedSymlinksLeadNowhere(t *testing.T) {
	t.Parallel()
	needTools(t, "a model's symlinks", "mkfifo")
	ctx := t.Context()
	srv := startServer(t)
	id := controlParked(ctx, t, srv, `echo mine > real.txt; ln -s /etc/shadow shadow; ln -s /etc etc; ln -s `+shellQuote(srv.dataDir)+` data; `+
		`ln -s ../../../../../../.. up; ln -s real.txt inner; mkfifo pipe; ls -la`)
	shadow, err := os.ReadFile("/etc/shadow")
	require.NoError(t, err)
	base := "/v1/sessions/" + id + "/files/"

	for _, p := range []string{"shadow", "etc/shadow", "etc/passwd", "data/lock", "up/etc/shadow", "pipe", "etc"} {
		status, body := controlRaw(t, srv, 10*time.Second, http.MethodGet, base+p, nil)
		require.Equal(t, http.StatusBadRequest, status, "GET %s: %s", p, body)
		require.Contains(t, body, `"field":"path"`, p)
		require.NotContains(t, body, strings.SplitN(string(shadow), "\n", 2)[0], p)
	}
	for _, dir := range []string{"etc", "data", "up", "up/etc"} {
		status, body := controlRaw(t, srv, 10*time.Second, http.MethodGet, "/v1/sessions/"+id+"/files?path="+dir, nil)
		require.Equal(t, http.StatusBadRequest, status, "list %s: %s", dir, body)
		require.NotContains(t, body, "passwd", dir)
		require.NotContains(t, body, "longhaul.db", dir)
	}
	status, body := controlRaw(t, srv, 10*time.Second, http.MethodGet, base+"inner", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "mine\n", body, "a symlink inside the workspace is read through")

	put := func(p string) (int, string) {
		return controlRaw(t, srv, 10*time.Second, http.MethodPut, base+p, []byte("planted by a person"), "Content-Type", "application/octet-stream")
	}
	for _, p := range []string{"etc/longhaul-control-test", "shadow", "data/longhaul-control-test", "up/tmp/longhaul-control-test", "inner", "pipe"} {
		status, body := put(p)
		require.Equal(t, http.StatusBadRequest, status, "PUT %s: %s", p, body)
	}
	for _, p := range []string{"/etc/longhaul-control-test", srv.dataDir + "/longhaul-control-test", "/tmp/longhaul-control-test"} {
		require.NoFileExists(t, p)
	}
	got, err := srv.api.GetFile(ctx, id, "", "real.txt")
	require.NoError(t, err)
	require.Equal(t, "mine\n", string(got), "a write to a symlink never reaches its target")

	status, body = controlRaw(t, srv, 10*time.Second, http.MethodDelete, base+"shadow", nil)
	require.Equal(t, http.StatusOK, status, body)
	status, body = controlRaw(t, srv, 10*time.Second, http.MethodDelete, base+"etc/passwd", nil)
	require.Equal(t, http.StatusBadRequest, status, body)
	after, err := os.ReadFile("/etc/shadow")
	require.NoError(t, err)
	require.Equal(t, shadow, after)
	require.FileExists(t, "/etc/passwd")
	l, err := srv.api.ListFiles(ctx, id, "", "")
	require.NoError(t, err)
	for _, e := range l.Entries {
		require.NotEqual(t, "shadow", e.Name, "the link itself was deleted")
	}
}

// TestAdversarialControl_ForeignPageCannotUpload: the upload is the one
// request whose body is not JSON. A page of another site (its Origin, or
// Sec-Fetch-Site) is refused even with the right type, a type a page can
// send without a preflight is refused, and an upload over the limit is a
// 413; none of them writes anything.
func TestAdversarialControl_ForeignPageCannotUpload(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := startServer(t)
	id := controlParked(ctx, t, srv, `echo mine > real.txt`)
	path := "/v1/sessions/" + id + "/files/real.txt"
	octet := "application/octet-stream"
	for _, h := range [][]string{
		{"Content-Type", octet, "Origin", "http://evil.example"},
		{"Content-Type", octet, "Origin", "null"},
		{"Content-Type", octet, "Sec-Fetch-Site", "cross-site"},
		{"Content-Type", "text/plain"},
		{"Content-Type", "application/x-www-form-urlencoded"},
		{"Content-Type", "multipart/form-data; boundary=x"},
		{"Content-Type", "application/json"},
		{},
	} {
		status, body := controlRaw(t, srv, 10*time.Second, http.MethodPut, path, []byte("from a foreign page"), h...)
		require.Equal(t, http.StatusForbidden, status, "%v: %s", h, body)
	}
	status, body := controlRaw(t, srv, 30*time.Second, http.MethodPut, path, make([]byte, 33<<20), "Content-Type", octet)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	got, err := srv.api.GetFile(ctx, id, "", "real.txt")
	require.NoError(t, err)
	require.Equal(t, "mine\n", string(got))
	for _, ev := range journal(ctx, t, srv.api, id) {
		require.NotEqual(t, lt.EventWorkspaceChanged, ev.Type, "nothing was journaled")
	}
}

// TestAdversarialControl_AnotherSessionsCheckpoint: a checkpoint id of
// another session, named under this one's path, is a 404: a session's
// URL reads only its own snapshots.
func TestAdversarialControl_AnotherSessionsCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := startServer(t)
	secret := controlParked(ctx, t, srv, `echo the other session > secret.txt`)
	other := controlParked(ctx, t, srv, `echo mine > real.txt`)
	cps, err := srv.api.ListCheckpoints(ctx, secret)
	require.NoError(t, err)
	snapshots := 0
	for _, cp := range cps.Data {
		if cp.Snapshot == "" {
			continue
		}
		snapshots++
		status, body := controlRaw(t, srv, 10*time.Second, http.MethodGet, "/v1/sessions/"+other+"/checkpoints/"+cp.ID+"/files/secret.txt", nil)
		require.Equal(t, http.StatusNotFound, status, body)
		require.NotContains(t, body, "the other session")
		status, body = controlRaw(t, srv, 10*time.Second, http.MethodGet, "/v1/sessions/"+other+"/checkpoints/"+cp.ID+"/files", nil)
		require.Equal(t, http.StatusNotFound, status, body)
		require.NotContains(t, body, "secret.txt")
	}
	require.NotZero(t, snapshots, "the other session has a checkpoint with a snapshot")
}

// TestAdversarialControl_StaleEditIsRefused: two people edit the same file
// of a parked session: each downloads it, the first saves, then the
// second saves an edit of the bytes they read, naming them with If-Match
// (the download's ETag) as the web UI's editor does. The second save is a
// 409 naming If-Match, and the first person's change is kept; a save
// naming the current bytes, or none, goes through.
func TestAdversarialControl_StaleEditIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := startServer(t)
	id := controlParked(ctx, t, srv, `echo draft > notes.md`)
	path := "/v1/sessions/" + id + "/files/notes.md"
	download := func() (string, string) {
		req, err := http.NewRequest(http.MethodGet, srv.url+path, nil)
		require.NoError(t, err)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		return string(b), resp.Header.Get("ETag")
	}
	save := func(content, etag string) (int, string) {
		return controlRaw(t, srv, 10*time.Second, http.MethodPut, path, []byte(content), "Content-Type", "application/octet-stream", "If-Match", etag)
	}
	_, first := download()
	_, second := download()
	status, body := save("draft\nreviewed by the first person\n", first)
	require.Equal(t, http.StatusOK, status, body)
	status, body = save("draft\nreviewed by the second person\n", second)
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, `"field":"If-Match"`)
	got, etag := download()
	require.Equal(t, "draft\nreviewed by the first person\n", got, "the first person's change is kept")

	status, body = controlRaw(t, srv, 10*time.Second, http.MethodDelete, path, nil, "If-Match", second)
	require.Equal(t, http.StatusConflict, status, body)
	status, body = save(got+"and by the second person\n", etag)
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, eventsOf(ctx, t, srv.api, id, lt.EventWorkspaceChanged), 2)
}

// TestAdversarialControl_WebUIStaleEditIsRefused: a person opens a file in
// the web UI's editor; meanwhile another person changes it through the
// API; the first person's save is refused (the editor sends the ETag it
// read as If-Match) and says why, and the other person's change is kept.
func TestAdversarialControl_WebUIStaleEditIsRefused(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	srv := startServer(t)
	id := controlParked(ctx, t, srv, `echo draft > notes.md`)

	page := b.root
	b.do(page, "open the session's files", navigate(srv.url+"/#/sessions/"+id+"?tab=files"))
	b.waitJS(page, "the agent's file in the listing", `document.querySelector('#files-table tr[data-path="notes.md"] .edit-btn') !== null`)
	b.click(page, `#files-table tr[data-path="notes.md"] .edit-btn`)
	b.waitJS(page, "the editor with the file", `(document.querySelector('#files-editor-text') || {}).value === 'draft\n'`)

	_, err := srv.api.PutFile(ctx, id, "notes.md", []byte("rewritten by another person\n"), "")
	require.NoError(t, err)
	b.setValue(page, "#files-editor-text", "draft\nedited in the browser\n")
	b.click(page, "#files-editor-save")
	b.waitJS(page, "the refusal", `(document.querySelector('#files-result .error') || {}).innerText?.includes('If-Match')`)
	got, err := srv.api.GetFile(ctx, id, "", "notes.md")
	require.NoError(t, err)
	require.Equal(t, "rewritten by another person\n", string(got), "the other person's change is kept")
	b.do(page, "leave the session page", chromedp.Navigate("about:blank"))
}

// TestAdversarialControl_CheckpointListingIsBounded: the model fills a
// directory with thousands of files, which its checkpoint's snapshot
// holds. Listing that snapshot is bounded like a live listing: at most
// 1,000 entries, truncated, with the total, so no answer grows with what
// a model chose to make.
func TestAdversarialControl_CheckpointListingIsBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := startServer(t)
	id := controlParked(ctx, t, srv, `mkdir many && cd many && touch $(seq -f f%05g 1 3000) && ls | wc -l`)
	live, err := srv.api.ListFiles(ctx, id, "", "many")
	require.NoError(t, err)
	require.Equal(t, 1000, len(live.Entries))
	require.True(t, live.Truncated)
	cps, err := srv.api.ListCheckpoints(ctx, id)
	require.NoError(t, err)
	cp := cps.Data[len(cps.Data)-1]
	require.NotEmpty(t, cp.Snapshot)
	l, err := srv.api.ListFiles(ctx, id, cp.ID, "many")
	require.NoError(t, err)
	require.Equal(t, 3000, l.Total)
	require.Equal(t, 1000, len(l.Entries), "a snapshot's listing is bounded as a live one is")
	require.True(t, l.Truncated)
	require.Equal(t, "many/f00001", l.Entries[0].Path, "sorted by name")
}

// TestAdversarialControl_MalformedPathsAreNamed: paths the file system
// refuses (a name or a path over its length limits, a file used as a
// directory) are the caller's mistake: a 400 or 404 naming path, never a
// 500, and never a journaled change that no copy of the workspace can
// hold.
func TestAdversarialControl_MalformedPathsAreNamed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := startServer(t)
	id := controlParked(ctx, t, srv, `echo mine > real.txt`)
	long := strings.Repeat("x", 300)
	deep := strings.Repeat("d/", 2100) + "f"
	for _, p := range []string{long, "dir/" + long, deep, "real.txt/x", "real.txt/x/y"} {
		base := "/v1/sessions/" + id + "/files"
		for _, r := range []struct {
			method, path string
			body         []byte
			headers      []string
		}{
			{http.MethodGet, base + "/" + p, nil, nil},
			{http.MethodGet, base + "?path=" + p, nil, nil},
			{http.MethodPut, base + "/" + p, []byte("x"), []string{"Content-Type", "application/octet-stream"}},
			{http.MethodDelete, base + "/" + p, nil, nil},
		} {
			status, body := controlRaw(t, srv, 10*time.Second, r.method, r.path, r.body, r.headers...)
			require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, status, "%s %s: %s", r.method, r.path, body)
			require.Contains(t, body, `"field":"path"`, "%s %s", r.method, r.path)
		}
	}
	// None was journaled: a change no copy can hold would fail on every
	// restore and keep the workspace from ever being current again.
	require.Empty(t, eventsOf(ctx, t, srv.api, id, lt.EventWorkspaceChanged))
	_, err := srv.api.PutFile(ctx, id, "dir/ok.txt", []byte("fine"), "")
	require.NoError(t, err)
	l, err := srv.api.ListFiles(ctx, id, "", "dir")
	require.NoError(t, err)
	require.Len(t, l.Entries, 1)
}
