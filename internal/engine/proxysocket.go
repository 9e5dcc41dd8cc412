package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// maxSocketPath is the longest Unix socket path every platform takes:
// sun_path holds 108 bytes on Linux and 104 on the BSDs and macOS, the
// terminating NUL included.
const maxSocketPath = 103

// proxySockets names the Unix sockets of the sessions' egress proxies. A
// socket's path must fit in sun_path, and a data directory may be deep (a
// test's temporary directory, a mounted volume): a name that does not fit
// under RuntimeDir becomes a hash of the session id, and when even that
// does not fit, the sockets go to a private directory (0700) of their own
// under the system's temporary directory, made once per engine.
type proxySockets struct {
	dir string // Config.RuntimeDir

	once     sync.Once
	fallback string
	err      error
}

// path returns the socket path of sessionID's proxy, creating its
// directory.
func (p *proxySockets) path(sessionID string) (string, error) {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return "", fmt.Errorf("runtime directory: %w", err)
	}
	if full := filepath.Join(p.dir, sessionID+".proxy.sock"); len(full) <= maxSocketPath {
		return full, nil
	}
	sum := sha256.Sum256([]byte(sessionID))
	short := hex.EncodeToString(sum[:8]) + ".sock"
	if full := filepath.Join(p.dir, short); len(full) <= maxSocketPath {
		return full, nil
	}
	p.once.Do(func() {
		p.fallback, p.err = os.MkdirTemp("", "longhaul-run-")
	})
	if p.err != nil {
		return "", fmt.Errorf("runtime directory for proxy sockets (the data directory's is too deep for a socket path): %w", p.err)
	}
	full := filepath.Join(p.fallback, short)
	if len(full) > maxSocketPath {
		return "", fmt.Errorf("runtime directory: no socket path of at most %d bytes (temporary directory %s)", maxSocketPath, p.fallback)
	}
	return full, nil
}

// close removes the fallback directory, if one was made.
func (p *proxySockets) close() {
	if p.fallback != "" {
		_ = os.RemoveAll(p.fallback)
	}
}
