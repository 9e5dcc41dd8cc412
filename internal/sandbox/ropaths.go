package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Operator-chosen directories a bwrap sandbox sees read-only, at the same
// place (serve --sandbox-ro-path): where a tool the agents need lives
// outside the system directories, e.g. an MCP server installed with npm
// into /opt/mcp. The sandbox sees nothing of the host beyond /usr, the
// system directories, a few files of /etc and these.

// reservedPaths are the sandbox's own mount points and the host places a
// read-only path may not be, nor be under: the sandbox builds these
// itself (a bind over them would replace what it built), and /etc is
// filtered file by file because it holds the host's secrets. /tmp itself
// is the sandbox's, but a directory under it may be shown there.
var reservedPaths = []string{"/proc", "/dev", "/etc", "/run", "/sys", WorkspaceDir}

// CheckReadOnlyPaths validates operator-chosen read-only paths and returns
// them cleaned: each absolute, existing, not the root, not one of the
// sandbox's own mount points or /etc, nor under one. field names the
// setting in errors (e.g. "--sandbox-ro-path").
func CheckReadOnlyPaths(field string, paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p == "" || !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%s %q: must be an absolute path", field, p)
		}
		c := filepath.Clean(p)
		if c == "/" || c == "/tmp" {
			return nil, fmt.Errorf("%s %q: the sandbox has its own %s; choose a directory under it", field, p, c)
		}
		if r := reservedOf(c); r != "" {
			return nil, fmt.Errorf("%s %q: %s is the sandbox's own (or holds the host's secrets); choose a directory outside it", field, p, r)
		}
		if _, err := os.Stat(c); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s %q: no such file or directory", field, p)
			}
			return nil, fmt.Errorf("%s %q: %w", field, p, err)
		}
		// The path as given and where its symlinks lead: neither may be
		// a reserved place (a link to /etc is /etc).
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", field, p, err)
		}
		if r := reservedOf(real); r != "" {
			return nil, fmt.Errorf("%s %q: %s is the sandbox's own (or holds the host's secrets); choose a directory outside it", field, p, r)
		}
		if real == "/" || real == "/tmp" {
			return nil, fmt.Errorf("%s %q: the sandbox has its own %s; choose a directory under it", field, p, real)
		}
		out = append(out, c)
	}
	return out, nil
}

// roSources returns where each read-only path leads now, refusing a path
// whose symlinks lead elsewhere than when the backend was made (real): a
// link swapped in meanwhile must not show the sandbox another directory.
func (b *bwrapBackend) roSources() ([]string, error) {
	out := make([]string, len(b.roPaths))
	for i, p := range b.roPaths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || real != b.roReal[i] {
			return nil, fmt.Errorf("read-only path %s no longer leads where it did when the server started; restart the server to use it", p)
		}
		out[i] = real
	}
	return out, nil
}

// reservedOf returns the reserved path p is or lies under, or "".
func reservedOf(p string) string {
	for _, r := range reservedPaths {
		if p == r || strings.HasPrefix(p, r+"/") {
			return r
		}
	}
	return ""
}

// visibleRoots are the host directories a bwrap sandbox sees at the same
// place: /usr, the system directories and the read-only paths.
func (b *bwrapBackend) visibleRoots() []string {
	return append(append([]string{"/usr"}, systemDirs...), b.roPaths...)
}

// visible reports whether the host file p (absolute, its symlinks
// resolved) is under a directory the sandbox sees.
func (b *bwrapBackend) visible(p string) bool {
	for _, r := range b.visibleRoots() {
		if rr, err := filepath.EvalSymlinks(r); err == nil {
			r = rr // /bin → usr/bin on a merged /usr
		}
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// checkProgram says why program cannot be started in the sandbox, or nil:
// an absolute path (or where a name on the sandbox's PATH leads, symlinks
// followed) must lie under a directory the sandbox sees. A relative path
// is the workspace's, which the sandbox sees. The error names the missing
// path and the setting that shows it.
func (b *bwrapBackend) checkProgram(program string) error {
	if program == "" || (strings.Contains(program, "/") && !filepath.IsAbs(program)) {
		return nil
	}
	hint := "only /usr, " + strings.Join(systemDirs, ", ") + " and the directories given to serve --sandbox-ro-path are"
	// The messages name only what the agent's definer gave: whether a host
	// path exists, or where a link leads, is not theirs to learn.
	if filepath.IsAbs(program) {
		real, err := filepath.EvalSymlinks(program)
		if err != nil || !b.visible(real) {
			return fmt.Errorf("the command %s is not visible in the sandbox (%s); install it there, or show its directory with serve --sandbox-ro-path %s", program, hint, filepath.Dir(program))
		}
		return nil
	}
	outside := false
	for _, dir := range filepath.SplitList(DefaultPath) {
		real, err := filepath.EvalSymlinks(filepath.Join(dir, program))
		if err != nil {
			continue
		}
		if fi, err := os.Stat(real); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			continue
		}
		if b.visible(real) {
			return nil
		}
		outside = true
	}
	if outside {
		return fmt.Errorf("the command %s is a link on the sandbox's PATH to a file the sandbox cannot see (%s); give the absolute path of the program, in a directory shown with serve --sandbox-ro-path", program, hint)
	}
	return fmt.Errorf("the command %s is not on the sandbox's PATH (%s): give its absolute path, in a directory shown with serve --sandbox-ro-path", program, DefaultPath)
}
