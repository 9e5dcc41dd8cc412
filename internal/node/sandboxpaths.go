package node

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

// checkSandboxROPaths checks the operator's read-only sandbox paths: the
// sandbox's rules (sandbox.CheckReadOnlyPaths), and none may show the
// sandbox what it must never read: the data directory (the database, other
// sessions' workspaces) or the vault's key file, nor a directory holding
// one. Symlinks are resolved on both sides, so a link cannot smuggle one in.
func checkSandboxROPaths(paths []string, dataDir, vaultKeyFile string) ([]string, error) {
	out, err := sandbox.CheckReadOnlyPaths("--sandbox-ro-path", paths)
	if err != nil {
		return nil, err
	}
	secret := []string{resolve(dataDir)}
	if vaultKeyFile != "" {
		secret = append(secret, resolve(vaultKeyFile))
	}
	for i, p := range out {
		real := resolve(p)
		for _, s := range secret {
			if real == s || strings.HasPrefix(s, real+"/") || strings.HasPrefix(real, s+"/") {
				return nil, fmt.Errorf("--sandbox-ro-path %q: it would show the sandbox the server's data directory or vault key", paths[i])
			}
		}
	}
	return out, nil
}

// resolve returns p absolute with its symlinks resolved, as far as they
// exist.
func resolve(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return filepath.Clean(p)
}
