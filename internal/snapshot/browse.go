package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// Browsing reads one directory or one file of a stored snapshot without
// restoring it (the API's read-only view of a checkpoint). Paths are
// workspace-relative with "/" separators and never follow a symlink: a
// symlink is described (its target), and a path going through one is
// ErrThroughSymlink, whatever its target.

// ErrThroughSymlink is matched by errors about a path that goes through a
// symlink of the snapshot.
var ErrThroughSymlink = errors.New("path goes through a symlink")

// Lookup returns the entry at rel in snapshot id ("" or "." is the root
// directory). An absent path is an error matching fs.ErrNotExist.
func Lookup(ctx context.Context, b Blobs, id, rel string) (*Entry, error) {
	e, _, err := walk(ctx, b, id, rel)
	return e, err
}

// ListDir returns the entries of directory rel in snapshot id, sorted by
// name (Path is the full workspace-relative path of each).
func ListDir(ctx context.Context, b Blobs, id, rel string) ([]Entry, error) {
	e, t, err := walk(ctx, b, id, rel)
	if err != nil {
		return nil, err
	}
	if e.Type != TypeDir {
		return nil, fmt.Errorf("list %q: not a directory", rel)
	}
	out := make([]Entry, 0, len(t.Entries))
	for i := range t.Entries {
		out = append(out, entryAt(&t.Entries[i], e.Path))
	}
	return out, nil
}

// CopyFile writes the content of file entry e (from Lookup) to w, checking
// every chunk and the whole against their digests: a store that returns
// other bytes is an error, never a silently wrong file.
func CopyFile(ctx context.Context, b Blobs, e *Entry, w io.Writer) error {
	if e.Type != TypeFile {
		return fmt.Errorf("read %q: not a file", e.Path)
	}
	te := treeEntry{Type: TypeFile, Size: e.Size, SHA256: e.SHA256, Chunks: e.Chunks}
	whole := sha256.New()
	for i, c := range te.chunks() {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := b.BlobGet(ctx, c.SHA256)
		if err != nil {
			return fmt.Errorf("file %q: get chunk %d (%s): %w", e.Path, i, c.SHA256, err)
		}
		if int64(len(data)) != c.Size || sha256Hex(data) != c.SHA256 {
			return fmt.Errorf("file %q: chunk %d: the store returned other bytes than blob %s", e.Path, i, c.SHA256)
		}
		whole.Write(data)
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	if got := hex.EncodeToString(whole.Sum(nil)); got != e.SHA256 {
		return fmt.Errorf("file %q: its chunks hash to %s, not to its sha256 %s", e.Path, got, e.SHA256)
	}
	return nil
}

// walk finds rel in snapshot id; for a directory it also returns its tree.
func walk(ctx context.Context, b Blobs, id, rel string) (*Entry, *tree, error) {
	if err := checkDigest("snapshot id", id); err != nil {
		return nil, nil, fmt.Errorf("browse snapshot: %w", err)
	}
	t, err := loadTree(ctx, b, id, true)
	if err != nil {
		return nil, nil, fmt.Errorf("browse snapshot %s: %w", id, err)
	}
	cur := &Entry{Path: ".", Type: TypeDir, SHA256: id, Mode: 0o755}
	rel = strings.Trim(rel, "/")
	if rel == "" || rel == "." {
		return cur, t, nil
	}
	parts := strings.Split(rel, "/")
	for _, name := range parts {
		if err := checkName(name); err != nil {
			return nil, nil, fmt.Errorf("path %q: %w", rel, err)
		}
		if cur.Type == TypeSymlink {
			return nil, nil, fmt.Errorf("path %q: %q is a symlink: %w", rel, cur.Path, ErrThroughSymlink)
		}
		if cur.Type != TypeDir {
			return nil, nil, fmt.Errorf("path %q: %q is not a directory: %w", rel, cur.Path, fs.ErrNotExist)
		}
		var found *treeEntry
		for j := range t.Entries {
			if n, _ := t.Entries[j].name(); n == name {
				found = &t.Entries[j]
				break
			}
		}
		if found == nil {
			return nil, nil, fmt.Errorf("path %q: %w", rel, fs.ErrNotExist)
		}
		parent := cur.Path
		if parent == "." {
			parent = ""
		}
		e := entryAt(found, parent)
		cur = &e
		if found.Type == TypeDir {
			if t, err = loadTree(ctx, b, found.Tree, false); err != nil {
				return nil, nil, fmt.Errorf("directory %q: %w", cur.Path, err)
			}
		}
	}
	return cur, t, nil
}

// entryAt is the Entry of te in directory dir ("" or "." for the root).
func entryAt(te *treeEntry, dir string) Entry {
	name, _ := te.name() // validated by decodeTree
	p := name
	if dir != "" && dir != "." {
		p = dir + "/" + name
	}
	e := Entry{Path: p, Type: te.Type, Mode: fs.FileMode(te.Mode)}
	switch te.Type {
	case TypeFile:
		e.Size, e.SHA256, e.Chunks = te.Size, te.SHA256, te.Chunks
	case TypeDir:
		e.SHA256 = te.Tree
	case TypeSymlink:
		e.Target, _ = te.target()
	}
	return e
}
