package longhaul_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func sha256Hex(b string) string {
	sum := sha256.Sum256([]byte(b))
	return hex.EncodeToString(sum[:])
}

// TestRuntimeFilesRoundTrip: a person's writes to the workspace of an idle
// session, and of a paused one, read back through the library as over
// the API; a write or delete naming bytes the file no longer holds is a
// conflict and changes nothing.
func TestRuntimeFilesRoundTrip(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	ctx := t.Context()
	s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: new(scripted(`[{"text":"hi"}]`)), Input: "hi"})
	require.NoError(t, err)
	waitStatus(t, rt, s.ID, lt.SessionIdle)

	ch, err := rt.PutFile(ctx, s.ID, "notes/a.txt", []byte("one"), "")
	require.NoError(t, err)
	require.Positive(t, ch.Seq, "the change is journaled")
	library := &lt.Actor{Name: "library", Role: lt.RoleAdmin}
	require.Equal(t, lt.WorkspaceChange{By: "person", Actor: library, Op: "write", Path: "notes/a.txt", SHA256: sha256Hex("one"), Size: 3, Seq: ch.Seq}, *ch)

	l, err := rt.ListFiles(ctx, s.ID, "", "notes")
	require.NoError(t, err)
	require.Equal(t, "notes", l.Path)
	require.Len(t, l.Entries, 1)
	require.Equal(t, "a.txt", l.Entries[0].Name)
	require.Equal(t, sha256Hex("one"), l.Entries[0].SHA256)
	require.True(t, l.Writable)
	data, err := rt.GetFile(ctx, s.ID, "", "notes/a.txt")
	require.NoError(t, err)
	require.Equal(t, "one", string(data))

	_, err = rt.PutFileIfMatch(ctx, s.ID, "notes/a.txt", []byte("lost"), "", sha256Hex("other"))
	require.True(t, client.IsConflict(err), "%v", err)
	require.ErrorContains(t, err, "put file notes/a.txt of "+s.ID+": ")

	ch, err = rt.PutFileIfMatch(ctx, s.ID, "notes/a.txt", []byte("two"), "", sha256Hex("one"))
	require.NoError(t, err)
	require.Equal(t, sha256Hex("one"), ch.PreviousSHA256)
	data, err = rt.GetFile(ctx, s.ID, "", "notes/a.txt")
	require.NoError(t, err)
	require.Equal(t, "two", string(data))

	_, err = rt.DeleteFileIfMatch(ctx, s.ID, "notes/a.txt", sha256Hex("one"))
	require.True(t, client.IsConflict(err), "%v", err)
	ch, err = rt.DeleteFile(ctx, s.ID, "notes/a.txt")
	require.NoError(t, err)
	require.Equal(t, "delete", ch.Op)
	require.Equal(t, sha256Hex("two"), ch.PreviousSHA256)
	_, err = rt.GetFile(ctx, s.ID, "", "notes/a.txt")
	require.True(t, client.IsNotFound(err), "%v", err)

	// A paused session's workspace is a person's too.
	sp := scripted(`[{"tool_calls":[{"name":"ask_human","arguments":{"question":"Which city?"}}]},{"text":"done"}]`, lt.ToolSpec{Name: "ask_human"})
	w, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &sp, Input: "go"})
	require.NoError(t, err)
	waitStatus(t, rt, w.ID, lt.SessionRequiresAction)
	p, err := rt.Pause(ctx, w.ID, nil)
	require.NoError(t, err)
	require.Equal(t, lt.SessionPaused, p.Status)
	_, err = rt.PutFile(ctx, w.ID, "in.txt", []byte("three"), "")
	require.NoError(t, err)
	data, err = rt.GetFile(ctx, w.ID, "", "in.txt")
	require.NoError(t, err)
	require.Equal(t, "three", string(data))

	// What the client checks before sending anything, the library checks
	// alike.
	_, err = rt.GetFile(ctx, s.ID, "", "/")
	require.EqualError(t, err, "get file: path is empty")
	_, err = rt.PutFile(ctx, "", "a.txt", nil, "")
	require.EqualError(t, err, "put file: sessionID is empty")
	_, err = rt.ListFiles(ctx, "", "", "")
	require.EqualError(t, err, "list files: sessionID is empty")
}
