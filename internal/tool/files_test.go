package tool_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func run(t *testing.T, tl tool.Tool, ws string, args any) *tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	res, err := tl.Run(context.Background(), &tool.Call{SessionID: "ses_test", Workspace: ws, Arguments: raw, IdempotencyKey: "k"})
	require.NoError(t, err)
	return res
}

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestBuiltins(t *testing.T) {
	t.Parallel()
	want := map[string]lt.EffectClass{
		"shell":      lt.EffectIrreversible,
		"read_file":  lt.EffectRead,
		"write_file": lt.EffectIdempotent,
		"edit_file":  lt.EffectIdempotent,
		"list_files": lt.EffectRead,
		// Refined per call by tool.HTTPRequestEffect.
		"http_request": lt.EffectIrreversible,
		"sqlite_query": lt.EffectRead,
		// Refined per call by tool.BrowserEffect.
		"browser": lt.EffectIrreversible,
	}
	tools := tool.Builtins()
	require.Len(t, tools, len(want))
	reg := tool.NewRegistry(tools...)
	for name, effect := range want {
		tl, ok := reg.Get(name)
		require.True(t, ok, name)
		require.Equal(t, effect, tl.Effect(), name)
		require.NotEmpty(t, tl.Description(), name)
		require.NoError(t, tool.CompileSchema(tl.Parameters()), name)
		// Callers get a copy they may change.
		p := tl.Parameters()
		p[0] = 'X'
		require.NoError(t, tool.CompileSchema(tl.Parameters()), name)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	content := "héllo\nworld\n"

	res := run(t, &tool.WriteFile{}, ws, map[string]any{"path": "docs/./notes.md", "content": content})
	require.Empty(t, res.Error)
	require.Equal(t, &tool.WriteFileOutput{Path: "docs/notes.md", Bytes: len(content), SHA256: hexSHA(content)}, res.Output)

	// Idempotent: the same call again gives the same output and file.
	again := run(t, &tool.WriteFile{}, ws, map[string]any{"path": "docs/./notes.md", "content": content})
	require.Equal(t, res, again)
	b, err := os.ReadFile(filepath.Join(ws, "docs", "notes.md"))
	require.NoError(t, err)
	require.Equal(t, content, string(b))

	res = run(t, &tool.ReadFile{}, ws, map[string]any{"path": "docs/notes.md"})
	require.Empty(t, res.Error)
	require.Equal(t, &tool.ReadFileOutput{Path: "docs/notes.md", Content: content, Size: int64(len(content))}, res.Output)

	// A window that would cut "é" (2 bytes at offset 1) ends before it.
	res = run(t, &tool.ReadFile{}, ws, map[string]any{"path": "docs/notes.md", "limit": 2})
	require.Equal(t, &tool.ReadFileOutput{Path: "docs/notes.md", Content: "h", Size: int64(len(content)), Truncated: true, NextOffset: 1}, res.Output)
	res = run(t, &tool.ReadFile{}, ws, map[string]any{"path": "docs/notes.md", "offset": 1, "limit": 5})
	require.Equal(t, &tool.ReadFileOutput{Path: "docs/notes.md", Content: "éllo", Size: int64(len(content)), Truncated: true, NextOffset: 6}, res.Output)
	res = run(t, &tool.ReadFile{}, ws, map[string]any{"path": "docs/notes.md", "offset": 100})
	require.Equal(t, &tool.ReadFileOutput{Path: "docs/notes.md", Content: "", Size: int64(len(content))}, res.Output)

	// Output JSON matches API.md.
	bj, err := json.Marshal(run(t, &tool.ReadFile{}, ws, map[string]any{"path": "docs/notes.md", "limit": 1}))
	require.NoError(t, err)
	require.JSONEq(t, `{"output":{"path":"docs/notes.md","content":"h","size":13,"truncated":true,"next_offset":1}}`, string(bj))
}

func TestReadFileBinaryIsBase64(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	data := []byte{0x89, 'P', 'N', 'G', 0x00, 0xff, 0xfe}
	require.NoError(t, os.WriteFile(filepath.Join(ws, "img.png"), data, 0o644))
	res := run(t, &tool.ReadFile{}, ws, map[string]any{"path": "img.png"})
	require.Empty(t, res.Error)
	out := res.Output.(*tool.ReadFileOutput)
	require.Equal(t, "base64", out.Encoding)
	got, err := base64.StdEncoding.DecodeString(out.Content)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.False(t, out.Truncated)
}

func TestReadFileLimitBoundByCall(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("a", 5000)), 0o644))
	raw := json.RawMessage(`{"path":"big.txt"}`)
	res, err := (&tool.ReadFile{}).Run(t.Context(), &tool.Call{Workspace: ws, Arguments: raw, MaxOutputBytes: 100})
	require.NoError(t, err)
	out := res.Output.(*tool.ReadFileOutput)
	require.Len(t, out.Content, 100)
	require.True(t, out.Truncated)
	require.Equal(t, int64(100), out.NextOffset)

	// JSON Schema integers may be written as 5.0 or 1e1.
	res, err = (&tool.ReadFile{}).Run(t.Context(), &tool.Call{Workspace: ws, Arguments: json.RawMessage(`{"path":"big.txt","offset":1e1,"limit":5.0}`)})
	require.NoError(t, err)
	require.Empty(t, res.Error)
	out = res.Output.(*tool.ReadFileOutput)
	require.Equal(t, "aaaaa", out.Content)
	require.Equal(t, int64(15), out.NextOffset)
}

func TestEditFile(t *testing.T) {
	t.Parallel()
	const original = "alpha\nbeta\ngamma\nbeta\n"
	tests := []struct {
		name     string
		content  string
		old, new string
		want     string // file content afterwards
		err      string
	}{
		{"once", original, "gamma", "GAMMA", "alpha\nbeta\nGAMMA\nbeta\n", ""},
		{"twice", original, "beta", "BETA", original, `edit "f.txt": old text occurs 2 times; it must occur exactly once`},
		{"zero", original, "delta", "DELTA", original, `edit "f.txt": old text occurs 0 times; it must occur exactly once`},
		{"overlapping occurrences count", "aaa", "aa", "b", "aaa", "old text occurs 2 times"},
		{"already applied", "alpha\nBETA-1\n", "beta", "BETA-1", "alpha\nBETA-1\n", ""},
		{"already applied, new contains old", "say hello world\n", "hello", "hello world", "say hello world\n", ""},
		{"new contains old, first run", "say hello\n", "hello", "hello world", "say hello world\n", ""},
		{"deletion", "keep drop keep", " drop", "", "keep keep", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			path := filepath.Join(ws, "f.txt")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o644))
			res := run(t, &tool.EditFile{}, ws, map[string]any{"path": "f.txt", "old": tc.old, "new": tc.new})
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(b))
			if tc.err != "" {
				require.Contains(t, res.Error, tc.err)
				require.Nil(t, res.Output)
				return
			}
			require.Empty(t, res.Error)
			require.Equal(t, &tool.EditFileOutput{Path: "f.txt", SHA256: hexSHA(tc.want)}, res.Output)
		})
	}
}

// The engine re-runs an idempotent call whose outcome a crash left unknown:
// the re-run must succeed, change nothing and say the same.
func TestEditFileRerunAfterSuccess(t *testing.T) {
	t.Parallel()
	for _, edit := range []struct{ old, new string }{
		{"beta", "BETA"},
		{"beta", "beta and more"},
		{"beta", "gamma beta"},
	} {
		ws := t.TempDir()
		path := filepath.Join(ws, "f.txt")
		require.NoError(t, os.WriteFile(path, []byte("alpha\nbeta\ngamma\n"), 0o644))
		args := map[string]any{"path": "f.txt", "old": edit.old, "new": edit.new}
		first := run(t, &tool.EditFile{}, ws, args)
		require.Empty(t, first.Error, edit)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		second := run(t, &tool.EditFile{}, ws, args)
		require.Equal(t, first, second, edit)
		again, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, string(after), string(again), edit)
	}
}

func TestListFiles(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "b.txt"), []byte("bb"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(ws, "dir"), 0o755))
	require.NoError(t, os.Symlink("a.txt", filepath.Join(ws, "link")))

	res := run(t, &tool.ListFiles{}, ws, map[string]any{})
	require.Empty(t, res.Error)
	out := res.Output.(*tool.ListFilesOutput)
	require.Equal(t, ".", out.Path)
	require.Equal(t, 4, out.Total)
	require.False(t, out.Truncated)
	b, err := json.Marshal(out.Entries)
	require.NoError(t, err)
	dirSize := out.Entries[2].Size
	require.JSONEq(t, `[
	  {"name":"a.txt","type":"file","size":1},
	  {"name":"b.txt","type":"file","size":2},
	  {"name":"dir","type":"dir","size":`+itoa(dirSize)+`},
	  {"name":"link","type":"symlink","size":5,"target":"a.txt"}]`, string(b))

	limited := run(t, &tool.ListFiles{Max: 2}, ws, map[string]any{"path": "."}).Output.(*tool.ListFilesOutput)
	require.True(t, limited.Truncated)
	require.Equal(t, 4, limited.Total)
	require.Len(t, limited.Entries, 2)
	require.Equal(t, "a.txt", limited.Entries[0].Name)

	res = run(t, &tool.ListFiles{}, ws, map[string]any{"path": "a.txt"})
	require.Contains(t, res.Error, "not a directory")
}

func TestFileToolsRefuseEscapes(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	require.NoError(t, os.Mkdir(ws, 0o700))
	require.NoError(t, os.Mkdir(outside, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "out")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "secret-link")))

	for _, path := range []string{"../outside/secret", "/etc/passwd", "out/secret", "secret-link", "out/new"} {
		calls := []struct {
			tl   tool.Tool
			args map[string]any
		}{
			{&tool.ReadFile{}, map[string]any{"path": path}},
			{&tool.WriteFile{}, map[string]any{"path": path, "content": "pwned"}},
			{&tool.EditFile{}, map[string]any{"path": path, "old": "secret", "new": "pwned"}},
		}
		for _, c := range calls {
			res := run(t, c.tl, ws, c.args)
			require.Contains(t, res.Error, `path "`+path+`" leaves the workspace`, "%s %s", c.tl.Name(), path)
			require.NotContains(t, res.Error, base, "host path leaked")
		}
	}
	res := run(t, &tool.ListFiles{}, ws, map[string]any{"path": "out"})
	require.Contains(t, res.Error, `path "out" leaves the workspace`)

	b, err := os.ReadFile(filepath.Join(outside, "secret"))
	require.NoError(t, err)
	require.Equal(t, "secret", string(b))
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

func TestFileToolsValidateArguments(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	tests := []struct {
		tl   tool.Tool
		args string
		want string
	}{
		{&tool.ReadFile{}, `{}`, "arguments.path: is required"},
		{&tool.ReadFile{}, `{"path":"a","offset":-1}`, "arguments.offset: must be >= 0"},
		{&tool.ReadFile{}, `{"path":"a","limit":0}`, "arguments.limit: must be >= 1"},
		{&tool.ReadFile{}, `{"path":"a","limit":2000000}`, "arguments.limit: must be <= 1048576"},
		{&tool.ReadFile{}, `{"path":""}`, "arguments.path: must be at least 1 characters long"},
		{&tool.WriteFile{}, `{"path":"a"}`, "arguments.content: is required"},
		{&tool.WriteFile{}, `{"path":"a","content":3}`, "arguments.content: must be string, got number"},
		{&tool.EditFile{}, `{"path":"a","old":"","new":"x"}`, "arguments.old: must be at least 1 characters long"},
		{&tool.EditFile{}, `{"path":"a","old":"x"}`, "arguments.new: is required"},
		{&tool.ListFiles{}, `{"path":7}`, "arguments.path: must be string, got number"},
		{&tool.ListFiles{}, `{"recursive":true}`, "arguments.recursive: is not an allowed field"},
	}
	for _, tc := range tests {
		res, err := tc.tl.Run(t.Context(), &tool.Call{Workspace: ws, Arguments: json.RawMessage(tc.args)})
		require.NoError(t, err)
		require.Equal(t, tc.want, res.Error, "%s %s", tc.tl.Name(), tc.args)
		require.Nil(t, res.Output)
	}
}

func TestFileToolsNeedWorkspace(t *testing.T) {
	t.Parallel()
	_, err := (&tool.ReadFile{}).Run(t.Context(), &tool.Call{Arguments: json.RawMessage(`{"path":"a"}`)})
	require.ErrorContains(t, err, "no workspace")
	_, err = (&tool.WriteFile{}).Run(t.Context(), &tool.Call{Workspace: filepath.Join(t.TempDir(), "missing"), Arguments: json.RawMessage(`{"path":"a","content":""}`)})
	require.ErrorContains(t, err, "open workspace")
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
