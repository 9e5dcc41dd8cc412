package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// LoadNodeID returns the node id kept in the data directory, creating a
// random one the first time. A stable id lets a restarted node take back its
// own sessions at once instead of waiting for their leases to expire.
func LoadNodeID(dir string) (string, error) {
	p := filepath.Join(dir, NodeIDFile)
	data, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(data))
		if !nodeIDPattern.MatchString(id) {
			return "", fmt.Errorf("node id file %s: %q is not a valid node id (letters, digits, '.', '_', '-'); delete the file to get a new one", p, id)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read node id: %w", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	id := "node-" + hex.EncodeToString(b[:])
	// Written to a temporary file and renamed, so a crash cannot leave a
	// half-written id behind.
	tmp, err := os.CreateTemp(dir, NodeIDFile+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create node id: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(id + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write node id: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write node id: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write node id: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", fmt.Errorf("write node id: %w", err)
	}
	return id, nil
}
