package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A person changing the workspace through the API (the engine's file
// endpoints) is held to a stricter rule than the tools: the path must not
// go through any symlink at all, inside or out. A symlink whose target
// leaves the workspace is an *EscapeError; one that stays inside is an
// ErrInvalidPath error saying to name its target. The rule keeps a
// person's write exactly where the journal says it went, on whichever node
// it is applied again.

// errThroughSymlink marks ResolveDirect's refusal of a path with a
// symlink on the way.
var errThroughSymlink = errors.New("through a symlink")

// ResolveDirect checks that the workspace-relative path rel names an entry
// reached without following a symlink: every existing parent must be a
// real directory. It returns the clean path and the entry's own Lstat (nil
// when it does not exist; the entry itself may be a symlink, which a
// delete removes, never follows).
func (d *Dir) ResolveDirect(rel string) (string, fs.FileInfo, error) {
	c, err := cleanFilePath(rel)
	if err != nil {
		return "", nil, err
	}
	parts := strings.Split(c, string(filepath.Separator))
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		fi, err := d.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return c, nil, nil
		}
		if err != nil {
			return "", nil, pathError("resolve", rel, err)
		}
		last := i == len(parts)-1
		if last {
			return c, fi, nil
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := d.root.Readlink(p)
			if err != nil {
				return "", nil, pathError("resolve", rel, err)
			}
			if filepath.IsAbs(target) {
				return "", nil, fmt.Errorf("%w%.0w", &EscapeError{Path: rel, Reason: "through a symlink"}, errThroughSymlink)
			}
			if _, err := CleanPath(filepath.Join(filepath.Dir(p), target)); err != nil {
				return "", nil, fmt.Errorf("%w%.0w", &EscapeError{Path: rel, Reason: "through a symlink"}, errThroughSymlink)
			}
			return "", nil, fmt.Errorf("path %q goes through the symlink %q: name the path of its target instead: %w%.0w", rel, filepath.ToSlash(p), ErrInvalidPath, errThroughSymlink)
		case !fi.IsDir():
			return "", nil, fmt.Errorf("path %q: %q is not a directory: %w", rel, filepath.ToSlash(p), ErrInvalidPath)
		}
	}
	return c, nil, nil
}

// StatDirect describes the entry rel, reached without following a symlink
// (ResolveDirect: a symlinked parent is refused), the entry itself not
// followed either (a symlink is described as one); nil when it does not
// exist. Its Name is rel's clean slash path.
func (d *Dir) StatDirect(rel string) (*Entry, error) {
	c, fi, err := d.ResolveDirect(rel)
	if err != nil || fi == nil {
		return nil, err
	}
	e := d.entryOf(c, filepath.ToSlash(c), fi)
	return &e, nil
}

// WriteDirect is WriteFile for a person's write: rel is reached without
// following a symlink (ResolveDirect), and a symlink at rel itself is
// refused (ErrInvalidPath) rather than written through, so the bytes land
// exactly at the path the journal names. A directory at rel (made since
// the change was accepted) is refused with ErrInvalidPath too: like a
// file on the way, it fails the change however often it is tried, which
// is how a caller tells it from a failure worth trying again.
func (d *Dir) WriteDirect(rel string, data []byte) error {
	c, fi, err := d.ResolveDirect(rel)
	if err != nil {
		return err
	}
	switch {
	case fi != nil && fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("write %q: is a symlink: write to the path of its target instead: %w", rel, ErrInvalidPath)
	case fi != nil && fi.IsDir():
		return fmt.Errorf("write %q: is a directory: %w", rel, ErrInvalidPath)
	}
	return d.WriteFile(c, data)
}

// Remove deletes the file or symlink rel (a symlink itself, never its
// target), reached without following a symlink (ResolveDirect). A
// directory is refused (ErrInvalidPath); a path that does not exist is an
// error matching fs.ErrNotExist.
func (d *Dir) Remove(rel string) error {
	c, fi, err := d.ResolveDirect(rel)
	if err != nil {
		return err
	}
	if fi == nil {
		return fmt.Errorf("remove %q: %w", rel, fs.ErrNotExist)
	}
	if fi.IsDir() {
		return fmt.Errorf("remove %q: is a directory (delete the files in it): %w", rel, ErrInvalidPath)
	}
	if err := d.root.Remove(c); err != nil {
		return pathError("remove", rel, err)
	}
	return d.syncDir(filepath.Dir(c), rel)
}

// OpenFile opens the regular file rel for reading (symlinks inside the
// workspace are followed, as by ReadFile; one leading out is an
// *EscapeError). Directories, devices, FIFOs and sockets are refused, with
// ErrInvalidPath. The caller closes the file.
func (d *Dir) OpenFile(rel string) (*os.File, fs.FileInfo, error) {
	c, err := cleanFilePath(rel)
	if err != nil {
		return nil, nil, err
	}
	f, err := d.root.OpenFile(c, readFlags, 0)
	if err != nil {
		return nil, nil, pathError("read", rel, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, pathError("read", rel, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, nil, fmt.Errorf("read %q: is a directory: %w", rel, ErrInvalidPath)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("read %q: not a regular file (%s): %w", rel, fi.Mode().Type(), ErrInvalidPath)
	}
	return f, fi, nil
}

// Lstat describes the entry rel itself (a symlink is not followed; a
// parent symlink inside the workspace is, one leading out is an
// *EscapeError).
func (d *Dir) Lstat(rel string) (fs.FileInfo, error) {
	c, err := CleanPath(rel)
	if err != nil {
		return nil, err
	}
	fi, err := d.root.Lstat(c)
	if err != nil {
		return nil, pathError("stat", rel, err)
	}
	return fi, nil
}
