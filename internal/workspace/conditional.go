package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// A person's change journaled against what the person saw (its basis) is
// applied only where the path still holds that: WriteDirectIf and
// RemoveIf compare and act in one go. The comparison reads the file; a
// program of the environment (an MCP server, a sub-agent's shell) that
// replaces it meanwhile is seen, because the entry is described again
// (same file, same size, same modification and change times) right
// before the rename or the removal. What a program writes between that
// last look and the rename, two system calls apart, is not seen, nor a
// rewrite in place of the same size within the file system's timestamp
// granularity (a few milliseconds) of the comparison; a file created where the basis said absent is never replaced (the
// new content is linked in, which fails on an existing name). Writes made
// by the caller's own process are excluded by its lock (the environment
// backends hold one per workspace around these calls).

// FoundThroughSymlink is what a conditional change finds at a path with a
// symlink on the way (planted since the person saw it): never its basis,
// and nothing is written or removed through it.
const FoundThroughSymlink = "a path through a symlink"

// resolveIf is ResolveDirect for a change with a basis: a symlink on the
// way is found (FoundThroughSymlink), not an error, since the path no
// longer holds what the person saw.
func (d *Dir) resolveIf(rel, basis string) (c string, fi fs.FileInfo, found string, err error) {
	c, fi, err = d.ResolveDirect(rel)
	if err != nil && basis != "" && errors.Is(err, errThroughSymlink) {
		return "", nil, FoundThroughSymlink, nil
	}
	return c, fi, "", err
}

// BasisAbsent is the basis of a path where nothing is.
const BasisAbsent = "absent"

// BasisOf is the basis of a regular file holding data: "sha256:<hex>".
func BasisOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// errAppeared: a create-only write met a file made since its check.
var errAppeared = errors.New("a file appeared at the path")

// Basis describes what rel holds, reached without following any symlink
// (ResolveDirect's rule: a symlinked parent is an error): "sha256:<hex>"
// of a regular file, BasisAbsent, or the kind of entry that is there
// ("dir", "symlink", "other").
func (d *Dir) Basis(rel string) (string, error) {
	c, fi, found, err := d.resolveIf(rel, "any")
	if err != nil || found != "" {
		return found, err
	}
	b, _, err := d.basisOf(rel, c, fi)
	return b, err
}

// basisOf is the basis of the clean path c, whose Lstat was fi (nil:
// absent), and the info of the file that was hashed (nil for any other
// entry), to check later that it is still the one.
func (d *Dir) basisOf(rel, c string, fi fs.FileInfo) (string, fs.FileInfo, error) {
	switch {
	case fi == nil:
		return BasisAbsent, nil, nil
	case !fi.Mode().IsRegular():
		return string(d.entryOf(c, filepath.ToSlash(c), fi).Type), nil, nil
	}
	f, err := d.root.OpenFile(c, readFlags, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return BasisAbsent, nil, nil
	}
	if err != nil {
		return "", nil, pathError("read", rel, err)
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return "", nil, pathError("read", rel, err)
	}
	if !os.SameFile(opened, fi) {
		// Replaced between the Lstat and the open (or a symlink planted
		// there meanwhile, followed by the open): described afresh.
		return d.basisAgain(rel, c)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", nil, pathError("read", rel, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), opened, nil
}

// basisAgain describes c once more, after it changed while being read.
func (d *Dir) basisAgain(rel, c string) (string, fs.FileInfo, error) {
	fi, err := d.root.Lstat(c)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return BasisAbsent, nil, nil
	case err != nil:
		return "", nil, pathError("read", rel, err)
	case fi.Mode().IsRegular():
		// Changing as it is read: what it holds is not what anyone saw.
		return changing, nil, nil
	}
	return string(d.entryOf(c, filepath.ToSlash(c), fi).Type), nil, nil
}

// unchanged reports whether the entry at c is still the file hashed
// (info hashed), as far as its description tells.
func (d *Dir) unchanged(c string, hashed fs.FileInfo) bool {
	fi, err := d.root.Lstat(c)
	if hashed == nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return err == nil && os.SameFile(fi, hashed) && fi.Size() == hashed.Size() &&
		fi.ModTime().Equal(hashed.ModTime()) && sameChange(fi, hashed)
}

// sameEntry reports whether the entry at c is still the one described by
// fi (not a file put in place of a symlink).
func (d *Dir) sameEntry(c string, fi fs.FileInfo) bool {
	now, err := d.root.Lstat(c)
	return err == nil && os.SameFile(now, fi) && now.Mode().Type() == fi.Mode().Type()
}

// WriteDirectIf is WriteDirect applied only where rel holds basis
// (Basis's description); basis "" writes whatever is there. It returns
// what rel held (found): when found is not basis, nothing was written.
// A symlink at rel is refused as by WriteDirect, whatever basis says.
func (d *Dir) WriteDirectIf(rel string, data []byte, basis string) (found string, err error) {
	c, fi, found, err := d.resolveIf(rel, basis)
	if err != nil || found != "" {
		return found, err
	}
	if basis == "" || (fi != nil && fi.Mode()&fs.ModeSymlink != 0) {
		return basis, d.WriteDirect(rel, data)
	}
	found, hashed, err := d.basisOf(rel, c, fi)
	if err != nil || found != basis {
		return found, err
	}
	if fi != nil && !fi.Mode().IsRegular() {
		return found, fmt.Errorf("write %q: not a regular file: %w", rel, ErrInvalidPath)
	}
	err = d.writeFile(c, data, func(dest string) (bool, error) {
		if dest != c {
			return false, fmt.Errorf("write %q: the path became a symlink: %w", rel, ErrInvalidPath)
		}
		if basis == BasisAbsent {
			return true, nil // linked in: a file made meanwhile is kept
		}
		// Looked at again now that the new content waits beside it: a
		// program's write while the file was hashed or the new one
		// written is seen.
		if !d.unchanged(c, hashed) {
			return false, errNotBasis
		}
		return false, nil
	})
	if errors.Is(err, errNotBasis) || errors.Is(err, errAppeared) {
		return d.changedBasis(rel, basis)
	}
	return found, err
}

// changedBasis is what rel holds once it was found changed at the commit:
// "changing" if it holds the basis again (written with the same bytes, or
// still being written), so that it is never taken for the basis.
func (d *Dir) changedBasis(rel, basis string) (string, error) {
	found, err := d.Basis(rel)
	if err == nil && found == basis {
		found = changing
	}
	return found, err
}

// changing describes a file found changed while it was compared.
const changing = "changing"

// errNotBasis: the path no longer holds its basis at the commit.
var errNotBasis = errors.New("the path no longer holds its basis")

// RemoveIf is Remove applied only where rel holds basis; basis "" removes
// whatever file or symlink is there. It returns what rel held (found):
// when found is not basis, nothing was removed. A path already absent is
// found BasisAbsent, with no error.
func (d *Dir) RemoveIf(rel, basis string) (found string, err error) {
	c, fi, found, err := d.resolveIf(rel, basis)
	if err != nil || found != "" {
		return found, err
	}
	if basis == "" {
		if fi == nil {
			return BasisAbsent, nil
		}
		return basis, d.Remove(rel)
	}
	found, hashed, err := d.basisOf(rel, c, fi)
	if err != nil || found != basis || fi == nil {
		return found, err
	}
	if fi.IsDir() {
		return found, fmt.Errorf("remove %q: is a directory (delete the files in it): %w", rel, ErrInvalidPath)
	}
	if hashed != nil && !d.unchanged(c, hashed) {
		return d.changedBasis(rel, basis)
	}
	if hashed == nil && !d.sameEntry(c, fi) {
		// A symlink (basis "symlink") replaced since it was described.
		return d.changedBasis(rel, basis)
	}
	if err := d.root.Remove(c); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return BasisAbsent, nil
		}
		return found, pathError("remove", rel, err)
	}
	return found, d.syncDir(filepath.Dir(c), rel)
}

// sameChange reports whether a and b have the same change time (a write
// that keeps the size and sets the modification time back still moves it).
func sameChange(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 {
		return true
	}
	return sa.Ctim == sb.Ctim
}
