package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

func TestCheckReadOnlyPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A link to a reserved place is that place.
	require.NoError(t, os.Symlink("/etc", filepath.Join(dir, "etc-link")))
	_, err := CheckReadOnlyPaths("--sandbox-ro-path", []string{filepath.Join(dir, "etc-link")})
	require.ErrorContains(t, err, "/etc is the sandbox's own")
	require.NoError(t, os.Remove(filepath.Join(dir, "etc-link")))

	got, err := CheckReadOnlyPaths("--sandbox-ro-path", []string{dir + "/./", "/usr/share"})
	require.NoError(t, err)
	require.Equal(t, []string{dir, "/usr/share"}, got, "cleaned")

	for p, want := range map[string]string{
		"":                 `--sandbox-ro-path "": must be an absolute path`,
		"opt/mcp":          `--sandbox-ro-path "opt/mcp": must be an absolute path`,
		"/":                `--sandbox-ro-path "/": the sandbox has its own /; choose a directory under it`,
		"/tmp/":            `--sandbox-ro-path "/tmp/": the sandbox has its own /tmp`,
		"/etc":             `--sandbox-ro-path "/etc": /etc is the sandbox's own (or holds the host's secrets); choose a directory outside it`,
		"/etc/ssl/private": `/etc is the sandbox's own`,
		"/proc/1":          `/proc is the sandbox's own`,
		"/workspace/x":     `/workspace is the sandbox's own`,
		"/run/longhaul":    `/run is the sandbox's own`,
		"/tmp/../proc":     `/proc is the sandbox's own`,
		dir + "/not-there": `no such file or directory`,
	} {
		_, err := CheckReadOnlyPaths("--sandbox-ro-path", []string{p})
		require.ErrorContains(t, err, want, p)
	}
}

// A directory given as read-only is seen at the same place, read-only; a
// host directory not given is not seen at all.
func TestBwrapReadOnlyPaths(t *testing.T) {
	t.Parallel()
	shared := testBwrap(t)
	// Private directories (t.TempDir's): a root server's sandbox user
	// reaches a read-only path through the enter helper's stage.
	tools := t.TempDir()
	hidden := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tools, "tool.sh"), []byte("#!/bin/sh\necho tool ran\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hidden, "secret.txt"), []byte("HIDDEN-CANARY"), 0o644))
	b := *shared
	b.roPaths, b.roReal = []string{tools}, []string{tools}
	ex := b.Exec(Spec{SessionID: "ses_ro", Workspace: t.TempDir()})

	res := run(t, ex, tools+"/tool.sh")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Equal(t, "tool ran\n", res.Stdout)
	res = run(t, ex, "echo x > "+tools+"/new.txt")
	require.NotEqual(t, 0, res.ExitCode, "read-only")
	require.Contains(t, res.Stderr, "Read-only file system")
	noFile(t, filepath.Join(tools, "new.txt"))
	res = run(t, ex, "cat "+hidden+"/secret.txt")
	require.NotEqual(t, 0, res.ExitCode)
	require.NotContains(t, res.Stdout, "HIDDEN-CANARY")

	// A program the sandbox cannot see is refused before it starts, with
	// the path and the setting that would show it.
	// Whether the file exists on the host is not told.
	missing := b.checkProgram(hidden + "/server")
	require.NoError(t, os.WriteFile(filepath.Join(hidden, "server"), []byte("#!/bin/sh\n"), 0o755))
	err := b.checkProgram(hidden + "/server")
	require.ErrorContains(t, err, "the command "+hidden+"/server is not visible in the sandbox")
	require.ErrorContains(t, err, "serve --sandbox-ro-path "+hidden)
	require.Equal(t, missing.Error(), err.Error(), "a missing program and a hidden one read the same")
	_, err = b.Start(t.Context(), Spec{SessionID: "ses_ro", Workspace: t.TempDir()}, &StartRequest{Command: "exec " + hidden + "/server", Program: hidden + "/server"})
	require.ErrorContains(t, err, "is not visible in the sandbox")
	require.NoError(t, b.checkProgram(tools+"/tool.sh"))
	require.NoError(t, b.checkProgram("sh"), "on the sandbox's PATH")
	require.NoError(t, b.checkProgram("./bin/server"), "the workspace's own")
	require.ErrorContains(t, b.checkProgram("no-such-program-x"), "is not on the sandbox's PATH")

	// A link in a visible directory that leads outside it does not count,
	// and where it leads is not told.
	require.NoError(t, os.Symlink(filepath.Join(hidden, "server"), filepath.Join(tools, "link")))
	err = b.checkProgram(filepath.Join(tools, "link"))
	require.ErrorContains(t, err, "is not visible in the sandbox")
	require.NotContains(t, err.Error(), hidden)
}

// A read-only path whose symlink is repointed after the server started is
// refused, not followed to wherever it leads now.
func TestBwrapReadOnlyPathSwappedIsRefused(t *testing.T) {
	t.Parallel()
	shared := testBwrap(t)
	root := t.TempDir()
	good, other := filepath.Join(root, "good"), filepath.Join(root, "other")
	require.NoError(t, os.Mkdir(good, 0o755))
	require.NoError(t, os.Mkdir(other, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "secret.txt"), []byte("SWAP-CANARY"), 0o644))
	link := filepath.Join(root, "tools")
	require.NoError(t, os.Symlink(good, link))
	b := *shared
	b.roPaths, b.roReal = []string{link}, []string{good}
	ex := b.Exec(Spec{SessionID: "ses_swap", Workspace: t.TempDir()})
	res := run(t, ex, "ls "+link)
	require.Equal(t, 0, res.ExitCode, res.Stderr)

	require.NoError(t, os.Remove(link))
	require.NoError(t, os.Symlink(other, link))
	_, err := ex.Run(t.Context(), &tool.ExecRequest{Command: "cat " + link + "/secret.txt"})
	require.ErrorContains(t, err, "no longer leads where it did when the server started")
}
