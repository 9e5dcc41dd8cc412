package workspace

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A workspace lives on one node's disk, but a session may run on several
// nodes in turn. Each node remembers, beside each workspace directory, the
// snapshots its copy is known to contain: those it took of it and those it
// restored into it. A copy that does not contain the session's latest
// snapshot is stale (another node worked on the session since) and must be
// restored before a tool runs in it.

// versionsSuffix names the file, beside the workspace directory (never in
// it: the agent must not see or change it), that lists its snapshots.
const versionsSuffix = ".snapshots"

// maxVersions bounds the list: only the latest snapshots matter.
const maxVersions = 64

func (m *Manager) versionsPath(sessionID string) (string, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return "", err
	}
	return filepath.Join(m.root, sessionID+versionsSuffix), nil
}

// RecordSnapshot notes that this node's copy of the workspace contains
// snapshot id (it was taken of it or restored into it).
func (m *Manager) RecordSnapshot(sessionID, id string) error {
	p, err := m.versionsPath(sessionID)
	if err != nil {
		return fmt.Errorf("record snapshot: %w", err)
	}
	ids, _, err := readVersions(p)
	if err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", sessionID, err)
	}
	ids = slices.DeleteFunc(ids, func(s string) bool { return s == id })
	ids = append(ids, id)
	if len(ids) > maxVersions {
		ids = ids[len(ids)-maxVersions:]
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(ids, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", sessionID, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", sessionID, err)
	}
	return nil
}

// HasSnapshot reports whether this node's copy of the workspace is known to
// contain snapshot id. tracked is false for a workspace made before
// versions were kept (it is then trusted as it is).
func (m *Manager) HasSnapshot(sessionID, id string) (known, tracked bool, err error) {
	p, err := m.versionsPath(sessionID)
	if err != nil {
		return false, false, fmt.Errorf("check snapshot: %w", err)
	}
	ids, tracked, err := readVersions(p)
	if err != nil {
		return false, false, fmt.Errorf("check snapshot of workspace %s: %w", sessionID, err)
	}
	return slices.Contains(ids, id), tracked, nil
}

// startVersions begins the (empty) list of a new workspace.
func (m *Manager) startVersions(sessionID string) error {
	p, err := m.versionsPath(sessionID)
	if err != nil {
		return err
	}
	return os.WriteFile(p, nil, 0o600)
}

func readVersions(p string) (ids []string, tracked bool, err error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			ids = append(ids, line)
		}
	}
	return ids, true, sc.Err()
}
