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
// snapshots its copy is known to contain, per session working in it (a
// root and its sub-agents share one): those it took of it and those it
// restored into it. A copy that does not contain a session's latest
// snapshot is stale for it (another node worked on the session since) and
// must be restored before a tool runs in it.

// versionsSuffix names the file, beside the workspace directory (never in
// it: the agent must not see or change it), that lists its snapshots.
const versionsSuffix = ".snapshots"

// maxVersions bounds the list per session: only the latest snapshots
// matter.
const maxVersions = 16

func (m *Manager) versionsPath(workspaceID string) (string, error) {
	if err := ValidateSessionID(workspaceID); err != nil {
		return "", err
	}
	return filepath.Join(m.root, workspaceID+versionsSuffix), nil
}

// RecordSnapshot notes that this node's copy of workspace workspaceID
// contains snapshot id of session sessionID (taken of it or restored into
// it).
func (m *Manager) RecordSnapshot(workspaceID, sessionID, id string) error {
	p, err := m.versionsPath(workspaceID)
	if err != nil {
		return fmt.Errorf("record snapshot: %w", err)
	}
	if err := ValidateSessionID(sessionID); err != nil {
		return fmt.Errorf("record snapshot: %w", err)
	}
	// Sub-agents sharing a workspace record their snapshots at the same
	// time: one read-modify-write at a time, and a temporary file of its
	// own for each.
	lock := m.listLock(workspaceID)
	lock.Lock()
	defer lock.Unlock()
	lines, _, err := readVersions(p)
	if err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	entry := sessionID + " " + id
	lines = slices.DeleteFunc(lines, func(s string) bool { return s == entry })
	lines = append(lines, entry)
	// Keep the latest maxVersions of each session.
	seen := map[string]int{}
	kept := lines[:0:0]
	for i := len(lines) - 1; i >= 0; i-- {
		sid, _, _ := strings.Cut(lines[i], " ")
		if seen[sid]++; seen[sid] <= maxVersions {
			kept = append(kept, lines[i])
		}
	}
	slices.Reverse(kept)
	tmp, err := os.CreateTemp(m.root, workspaceID+versionsSuffix+".*.tmp")
	if err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing to remove
	_, err = tmp.WriteString(strings.Join(kept, "\n") + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	return nil
}

// HasSnapshot reports whether this node's copy of workspace workspaceID is
// known to contain snapshot id of session sessionID. tracked is false for
// a workspace made before versions were kept (it is then trusted as it is).
func (m *Manager) HasSnapshot(workspaceID, sessionID, id string) (known, tracked bool, err error) {
	p, err := m.versionsPath(workspaceID)
	if err != nil {
		return false, false, fmt.Errorf("check snapshot: %w", err)
	}
	lines, tracked, err := readVersions(p)
	if err != nil {
		return false, false, fmt.Errorf("check snapshot of workspace %s: %w", workspaceID, err)
	}
	return slices.Contains(lines, sessionID+" "+id), tracked, nil
}

// startVersions begins the (empty) list of a new workspace.
func (m *Manager) startVersions(workspaceID string) error {
	p, err := m.versionsPath(workspaceID)
	if err != nil {
		return err
	}
	return os.WriteFile(p, nil, 0o600)
}

func readVersions(p string) (lines []string, tracked bool, err error) {
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
			lines = append(lines, line)
		}
	}
	return lines, true, sc.Err()
}
