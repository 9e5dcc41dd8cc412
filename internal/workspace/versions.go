package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
//
// A copy without a list contains no snapshot: a new copy has none (Ensure
// makes no file; the first record does), and a removal takes the list
// away first. A copy made before the lists were kept (there is no other
// way to tell it from a new one) is restored from the session's latest
// snapshot the first time it is used.
//
// The list is written on every step's checkpoint, so it is kept cheaply:
// the file is a log, one "session snapshot" line appended per record (a
// record moves an entry to the end, as replaying the log does), rewritten
// only when it has grown well past the list it stands for; a record that
// changes nothing (the step's snapshot is the session's latest entry
// already, as when a step changed no file) writes nothing, and when this
// Manager wrote or read that entry last it does not even look at the file
// (a record left out costs a restore at worst, never a claim); and each
// Manager keeps the list it last read or wrote in memory, trusted, for
// what the copy holds, while the file's size, modification time and
// identity are what it saw.
//
// A copy that only ever held the empty snapshot, of a session that shares
// it with no other (a session whose tools never wrote a file, as many do
// not), is given no file: its entries are kept in memory
// (RecordEmptySnapshot), never dropped for room, and written out with the
// first entry of another snapshot, or before anything may write into the
// copy or share it (WriteOut, which the Environment and the engine call).
// Kept in memory, the entries so stand for a copy nothing wrote to since,
// and what a restart forgets of them costs nothing: an empty directory
// holds the empty snapshot, whatever its list says (Empty). Making a file
// costs an inode, which on some file systems costs more than the rest of a
// step.
//
// Nothing here is synced, and nothing needs to be: what a crash may do to
// the log is lose its tail, or leave a last line cut short. A lost entry
// only makes the copy look stale, which costs a restore; a cut line is
// never read as an entry (only lines ending in a newline count, and an
// entry must look like one), so the list never claims a snapshot the copy
// does not contain.

// versionsSuffix names the file, beside the workspace directory (never in
// it: the agent must not see or change it), that lists its snapshots.
const versionsSuffix = ".snapshots"

// maxVersions bounds the list per session: only the latest snapshots
// matter.
const maxVersions = 16

// maxCachedLists bounds how many workspaces' lists a Manager keeps in
// memory; past it, one that has a file is dropped (and read again when
// next needed). Those kept in memory only are not (the node's workspaces
// bound them).
const maxCachedLists = 4096

// maxEvictionProbes bounds the lists looked at for one to drop.
const maxEvictionProbes = 64

// versionList is the list of one workspace as a Manager last saw its file.
type versionList struct {
	entries []string // "session snapshot", oldest first, at most maxVersions per session
	// logLines is how many entries the file holds (replayed, they make
	// entries); the file is rewritten when it holds far more.
	logLines int
	// cutLine is true when the file ends in a line cut short by a crash:
	// the next append starts a new line.
	cutLine bool
	info    fs.FileInfo // the file when it was last read or written here
	// unwritten: there is no file; the entries (of empty snapshots,
	// RecordEmptySnapshot) are kept here only, and info is the workspace
	// directory's, whose identity they hold for.
	unwritten bool
}

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
	return m.record(workspaceID, sessionID, id, false)
}

// RecordEmptySnapshot is RecordSnapshot for id, a snapshot of the empty
// workspace (snapshot.EmptyID): a copy that has no list is given none for
// it, the entry is kept in memory until another entry is recorded or
// WriteOut is called (see above).
func (m *Manager) RecordEmptySnapshot(workspaceID, sessionID, id string) error {
	return m.record(workspaceID, sessionID, id, true)
}

func (m *Manager) record(workspaceID, sessionID, id string, empty bool) error {
	p, err := m.versionsPath(workspaceID)
	if err != nil {
		return fmt.Errorf("record snapshot: %w", err)
	}
	if err := ValidateSessionID(sessionID); err != nil {
		return fmt.Errorf("record snapshot: %w", err)
	}
	if !validSnapshotID(id) {
		return fmt.Errorf("record snapshot of workspace %s: snapshot id %q is empty or contains a space or control character", workspaceID, id)
	}
	// Sub-agents sharing a workspace record their snapshots at the same
	// time: one update at a time.
	defer m.lockList(workspaceID)()
	entry := sessionID + " " + id
	if l := m.cachedVersions(workspaceID); l != nil && latestOf(l.entries, sessionID) == entry {
		// The session's latest as this Manager last saw the list: a
		// step that changed nothing. Were the file changed since by
		// another Manager, the entry left out would only make the copy
		// look stale.
		return nil
	}
	l, err := m.loadVersions(workspaceID, p)
	if err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	if l != nil && latestOf(l.entries, sessionID) == entry {
		return nil // already the session's latest: the list would not change
	}
	if (l == nil || l.unwritten) && empty {
		return m.keepUnwritten(workspaceID, l, entry)
	}
	if l == nil {
		// No list yet (a new copy): it begins with this line.
		return m.startVersions(workspaceID, p, []string{entry})
	}
	entries := addVersion(slices.Clone(l.entries), entry)
	if l.unwritten {
		// The first entry that is not the empty snapshot: the file is
		// made, with those kept in memory so far.
		return m.startVersions(workspaceID, p, entries)
	}
	if l.logLines+1 > 2*len(entries)+4*maxVersions {
		return m.rewriteVersions(workspaceID, p, entries)
	}
	line := entry + "\n"
	if l.cutLine {
		line = "\n" + line
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		// Removed meanwhile (by another Manager on the root): begin anew.
		return m.rewriteVersions(workspaceID, p, entries)
	}
	if err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	_, err = f.WriteString(line)
	var info fs.FileInfo
	if err == nil {
		info, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// What landed, if anything, is read back next time.
		m.uncacheVersions(workspaceID)
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	m.cacheVersions(workspaceID, &versionList{entries: entries, logLines: l.logLines + 1, info: info})
	return nil
}

// RecordRestore notes that this node's copy of workspace workspaceID was
// restored from snapshot id of session sessionID: it now holds that
// snapshot and nothing the session's list said before. Every other entry
// of the session is dropped (its snapshots, and the markers of the
// people's changes, whose "-conflict" twins too: a marker must mean "the
// copy holds the change", or a change applied before the restore would be
// taken as made and never made again), then id recorded.
func (m *Manager) RecordRestore(workspaceID, sessionID, id string) error {
	p, err := m.versionsPath(workspaceID)
	if err != nil {
		return fmt.Errorf("record restore: %w", err)
	}
	if err := ValidateSessionID(sessionID); err != nil {
		return fmt.Errorf("record restore: %w", err)
	}
	if !validSnapshotID(id) {
		return fmt.Errorf("record restore of workspace %s: snapshot id %q is empty or contains a space or control character", workspaceID, id)
	}
	defer m.lockList(workspaceID)()
	l, err := m.loadVersions(workspaceID, p)
	if err != nil {
		return fmt.Errorf("record restore of workspace %s: %w", workspaceID, err)
	}
	var entries []string
	if l != nil {
		entries = slices.DeleteFunc(slices.Clone(l.entries), func(e string) bool {
			s, _, _ := strings.Cut(e, " ")
			return s == sessionID
		})
	}
	return m.rewriteVersions(workspaceID, p, append(entries, sessionID+" "+id))
}

// rewriteVersions replaces the file with exactly entries, through a
// temporary file and a rename, so a reader never sees it half written.
func (m *Manager) rewriteVersions(workspaceID, p string, entries []string) error {
	m.uncacheVersions(workspaceID)
	tmp, err := os.CreateTemp(m.root, workspaceID+versionsSuffix+".*.tmp")
	if err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing to remove
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	_, err = tmp.WriteString(b.String())
	var info fs.FileInfo
	if err == nil {
		info, err = tmp.Stat()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	m.cacheVersions(workspaceID, &versionList{entries: entries, logLines: len(entries), info: info})
	return nil
}

// HasSnapshot reports whether this node's copy of workspace workspaceID is
// known to contain snapshot id of session sessionID. tracked is false when
// this node has no copy at all (neither the workspace's directory nor its
// list): a copy without a list is tracked, and contains no snapshot.
func (m *Manager) HasSnapshot(workspaceID, sessionID, id string) (known, tracked bool, err error) {
	p, err := m.versionsPath(workspaceID)
	if err != nil {
		return false, false, fmt.Errorf("check snapshot: %w", err)
	}
	defer m.lockList(workspaceID)()
	l, err := m.loadVersions(workspaceID, p)
	if err != nil {
		return false, false, fmt.Errorf("check snapshot of workspace %s: %w", workspaceID, err)
	}
	if l == nil {
		_, err := os.Lstat(filepath.Join(m.root, workspaceID))
		if errors.Is(err, fs.ErrNotExist) {
			return false, false, nil
		}
		if err != nil {
			return false, false, fmt.Errorf("check snapshot of workspace %s: %w", workspaceID, err)
		}
		return false, true, nil
	}
	return slices.Contains(l.entries, sessionID+" "+id), true, nil
}

// WriteOut writes to disk the entries of workspaceID's copy kept in memory
// only (RecordEmptySnapshot), if any: something may write into the copy,
// or another session work in it.
func (m *Manager) WriteOut(workspaceID string) error {
	p, err := m.versionsPath(workspaceID)
	if err != nil {
		return fmt.Errorf("write out snapshot list: %w", err)
	}
	if l := m.cachedVersions(workspaceID); l == nil || !l.unwritten {
		return nil // the usual case: nothing to take the lock for
	}
	defer m.lockList(workspaceID)()
	l, err := m.loadVersions(workspaceID, p)
	if err != nil {
		return fmt.Errorf("write out snapshot list of workspace %s: %w", workspaceID, err)
	}
	if l == nil || !l.unwritten {
		return nil
	}
	return m.startVersions(workspaceID, p, l.entries)
}

// Empty reports whether this node's copy of workspace workspaceID is an
// empty directory: it holds the empty snapshot (of any session working in
// it), whatever its list says. A copy that does not exist is not empty.
func (m *Manager) Empty(workspaceID string) (bool, error) {
	if err := ValidateSessionID(workspaceID); err != nil {
		return false, fmt.Errorf("check workspace: %w", err)
	}
	dir := filepath.Join(m.root, workspaceID)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("check workspace %s: %w", workspaceID, err)
	case !fi.IsDir():
		return false, nil // not a copy Create would keep
	}
	f, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("check workspace %s: %w", workspaceID, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	switch {
	case errors.Is(err, io.EOF):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("check workspace %s: %w", workspaceID, err)
	}
	return len(names) == 0, nil
}

// startVersions begins the list of a workspace that has no file with
// entries (the last one new): the file is made with its lines
// (exclusively, so that a list made meanwhile by another Manager is never
// replaced), with no temporary file. A crash may leave it empty or its
// last line cut short, which reads as a list without the entry. The caller
// holds the list's lock.
func (m *Manager) startVersions(workspaceID, p string, entries []string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Made meanwhile by another Manager on the root: added to (what
		// this one kept in memory only gives way to the file's list).
		l, err := m.loadVersions(workspaceID, p)
		if err != nil {
			return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
		}
		var have []string
		if l != nil {
			have = l.entries
		}
		return m.rewriteVersions(workspaceID, p, addVersion(slices.Clone(have), entries[len(entries)-1]))
	}
	if err != nil {
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	_, err = f.WriteString(b.String())
	var info fs.FileInfo
	if err == nil {
		info, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		m.uncacheVersions(workspaceID)
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	m.cacheVersions(workspaceID, &versionList{entries: entries, logLines: len(entries), info: info})
	return nil
}

// keepUnwritten records entry, of an empty snapshot, in memory only, in
// the list l kept so far (nil: none). The caller holds the list's lock.
func (m *Manager) keepUnwritten(workspaceID string, l *versionList, entry string) error {
	var entries []string
	if l != nil {
		entries = slices.Clone(l.entries)
	}
	fi, err := os.Lstat(filepath.Join(m.root, workspaceID))
	if err != nil {
		// No copy to hold it (the snapshot would have failed): nothing
		// is kept.
		m.uncacheVersions(workspaceID)
		return fmt.Errorf("record snapshot of workspace %s: %w", workspaceID, err)
	}
	m.cacheVersions(workspaceID, &versionList{entries: addVersion(entries, entry), info: fi, unwritten: true})
	return nil
}

// dropVersions removes the list of workspaceID, from the disk and from
// memory: its copy is being removed, or made anew.
func (m *Manager) dropVersions(workspaceID string) error {
	p, err := m.versionsPath(workspaceID)
	if err != nil {
		return err
	}
	defer m.lockList(workspaceID)()
	m.uncacheVersions(workspaceID)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// listLockStripes is how many locks the snapshot lists share.
const listLockStripes = 64

// lockList takes the lock of workspaceID's snapshot list and returns its
// release.
func (m *Manager) lockList(workspaceID string) (unlock func()) {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(workspaceID); i++ {
		h = (h ^ uint32(workspaceID[i])) * 16777619
	}
	mu := &m.listLocks[h%listLockStripes]
	mu.Lock()
	return mu.Unlock
}

// loadVersions returns the list of workspaceID, from memory while the file
// is the one last seen here, else read from p; nil when there is no file
// (a copy that contains no snapshot). The caller holds the list's lock
// (lockList).
func (m *Manager) loadVersions(workspaceID, p string) (*versionList, error) {
	info, err := os.Stat(p)
	if err == nil {
		if l := m.cachedVersions(workspaceID); l != nil && sameFileState(l.info, info) {
			return l, nil
		}
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(p)
	}
	if errors.Is(err, fs.ErrNotExist) {
		if l := m.cachedVersions(workspaceID); l != nil && l.unwritten {
			// Entries kept in memory, for the directory they were
			// recorded in: not one made since in its place.
			if fi, err := os.Lstat(filepath.Join(m.root, workspaceID)); err == nil && os.SameFile(l.info, fi) {
				return l, nil
			}
		}
		m.uncacheVersions(workspaceID)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l := parseVersions(data)
	// The file may have changed between the Stat and the read: then the
	// next call reads it again, which costs a read, never an entry.
	l.info = info
	m.cacheVersions(workspaceID, l)
	return l, nil
}

// cachedVersions returns the list of workspaceID kept in memory, if any.
func (m *Manager) cachedVersions(workspaceID string) *versionList {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lists[workspaceID]
}

func (m *Manager) uncacheVersions(workspaceID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.lists, workspaceID)
}

func (m *Manager) cacheVersions(workspaceID string, l *versionList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lists == nil {
		m.lists = make(map[string]*versionList)
	}
	if _, ok := m.lists[workspaceID]; !ok && len(m.lists) >= m.maxLists {
		// One read again from its file when needed, among the first few
		// (past them the map grows rather than scan on).
		probes := 0
		for k, l := range m.lists {
			if !l.unwritten {
				delete(m.lists, k)
				break
			}
			if probes++; probes == maxEvictionProbes {
				break
			}
		}
	}
	m.lists[workspaceID] = l
}

// sameFileState reports whether the file is, by its identity, size and
// modification time, the one a list was read from or written to.
func sameFileState(a, b fs.FileInfo) bool {
	return a != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// readVersions returns the list the file at p stands for; tracked is false
// when there is no file.
func readVersions(p string) (lines []string, tracked bool, err error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return parseVersions(data).entries, true, nil
}

// parseVersions replays a log: each complete line that is an entry
// records it again. A last line without its newline was cut short by a
// crash and is not an entry.
func parseVersions(data []byte) *versionList {
	l := &versionList{}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			l.cutLine = true
			break
		}
		line := strings.TrimSpace(string(data[:i]))
		data = data[i+1:]
		if !validEntry(line) {
			continue
		}
		l.logLines++
		l.entries = addVersion(l.entries, line)
	}
	return l
}

// addVersion moves entry to the end of entries (adding it if new) and keeps
// the latest maxVersions of each session.
func addVersion(entries []string, entry string) []string {
	entries = slices.DeleteFunc(entries, func(s string) bool { return s == entry })
	entries = append(entries, entry)
	sid, _, _ := strings.Cut(entry, " ")
	n := 0
	for _, e := range entries {
		if s, _, _ := strings.Cut(e, " "); s == sid {
			n++
		}
	}
	if n <= maxVersions {
		return entries
	}
	// Exactly one too many: drop the session's oldest.
	for i, e := range entries {
		if s, _, _ := strings.Cut(e, " "); s == sid {
			return slices.Delete(entries, i, i+1)
		}
	}
	return entries
}

// latestOf returns the latest entry of session sid, or "".
func latestOf(entries []string, sid string) string {
	for i := len(entries) - 1; i >= 0; i-- {
		if s, _, _ := strings.Cut(entries[i], " "); s == sid {
			return entries[i]
		}
	}
	return ""
}

// validEntry reports whether line is "session snapshot" with a valid
// session id: anything else (garbage a crash left) is not an entry.
func validEntry(line string) bool {
	sid, id, ok := strings.Cut(line, " ")
	return ok && ValidateSessionID(sid) == nil && validSnapshotID(id)
}

func validSnapshotID(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
