package workspace

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
)

// DefaultListMax is the number of entries List returns when max is not
// positive.
const DefaultListMax = 1000

// EntryType is the kind of a directory entry.
type EntryType string

// Entry types. Other covers devices, FIFOs and sockets.
const (
	EntryFile    EntryType = "file"
	EntryDir     EntryType = "dir"
	EntrySymlink EntryType = "symlink"
	EntryOther   EntryType = "other"
)

// Entry is one directory entry. Symlinks are described, never followed.
type Entry struct {
	Name string    `json:"name"`
	Type EntryType `json:"type"`
	// Size is the file size in bytes; for a symlink, the length of its
	// target; for a directory, what the file system reports.
	Size int64 `json:"size"`
	// Target is a symlink's target, as stored in the link.
	Target string `json:"target,omitempty"`
}

// Listing is the result of List.
type Listing struct {
	// Path is the clean workspace-relative path that was listed.
	Path string
	// Entries are sorted by name (byte order).
	Entries []Entry
	// Total is the number of entries in the directory.
	Total int
	// Truncated is true when Total > len(Entries).
	Truncated bool
}

// List returns the first max entries of directory rel by name (the whole
// directory is scanned, but only max names are held at any time, so a huge
// directory costs time, not memory). rel itself may be a symlink to a
// directory inside the workspace.
func (d *Dir) List(rel string, max int) (*Listing, error) {
	c, err := CleanPath(rel)
	if err != nil {
		return nil, err
	}
	if max <= 0 {
		max = DefaultListMax
	}
	f, err := d.root.Open(c)
	if err != nil {
		return nil, pathError("list", rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, pathError("list", rel, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("list %q: not a directory", rel)
	}

	keep := &maxHeap{}
	total := 0
	for {
		batch, err := f.ReadDir(256)
		for _, de := range batch {
			total++
			if keep.Len() < max {
				heap.Push(keep, de.Name())
			} else if de.Name() < (*keep)[0] {
				(*keep)[0] = de.Name()
				heap.Fix(keep, 0)
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, pathError("list", rel, err)
		}
	}
	names := []string(*keep)
	slices.Sort(names)

	out := &Listing{Path: c, Entries: make([]Entry, 0, len(names)), Total: total}
	for _, name := range names {
		p := filepath.Join(c, name)
		info, err := d.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			// Removed while we listed: the listing is a snapshot of a
			// directory that is changing anyway.
			out.Total--
			continue
		}
		if err != nil {
			return nil, pathError("list", filepath.Join(rel, name), err)
		}
		out.Entries = append(out.Entries, d.entryOf(p, name, info))
	}
	out.Truncated = out.Total > len(out.Entries)
	return out, nil
}

// entryOf describes the entry at p (Lstat's info), named name.
func (d *Dir) entryOf(p, name string, info fs.FileInfo) Entry {
	e := Entry{Name: name, Size: info.Size()}
	switch m := info.Mode(); {
	case m.IsRegular():
		e.Type = EntryFile
	case m.IsDir():
		e.Type = EntryDir
	case m&fs.ModeSymlink != 0:
		e.Type = EntrySymlink
		if target, err := d.root.Readlink(p); err == nil {
			e.Target = target
		}
	default:
		e.Type = EntryOther
	}
	return e
}

// maxHeap keeps the largest retained name at the top, so a smaller name can
// replace it in O(log n).
type maxHeap []string

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
