package workspace

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ReadResult is a window of a file's bytes.
type ReadResult struct {
	// Path is the clean workspace-relative path that was read.
	Path string
	// Data holds at most the requested limit of bytes, starting at the
	// requested offset.
	Data []byte
	// Size is the size of the whole file when it was opened.
	Size int64
	// Truncated is true when the file has bytes after the returned window.
	Truncated bool
}

// ReadFile reads up to limit bytes of the regular file rel, starting at
// offset. An offset at or past the end gives empty Data. Only limit bytes are
// ever buffered, whatever the file's size. Directories, devices, sockets and
// FIFOs are refused (a FIFO is opened without blocking, so a FIFO planted in
// the workspace cannot hang the caller).
func (d *Dir) ReadFile(rel string, offset, limit int64) (*ReadResult, error) {
	c, err := cleanFilePath(rel)
	if err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("read %q: offset %d is negative", rel, offset)
	}
	if limit <= 0 {
		return nil, fmt.Errorf("read %q: limit %d is not positive", rel, limit)
	}
	f, err := d.root.OpenFile(c, readFlags, 0)
	if err != nil {
		return nil, pathError("read", rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, pathError("read", rel, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("read %q: is a directory", rel)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %q: not a regular file (%s)", rel, fi.Mode().Type())
	}
	res := &ReadResult{Path: c, Size: fi.Size()}
	if offset >= res.Size {
		res.Data = []byte{}
		return res, nil
	}
	buf := make([]byte, min(limit, res.Size-offset))
	n, err := io.ReadFull(io.NewSectionReader(f, offset, int64(len(buf))), buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		// A shorter read means the file shrank since Stat; what was read is
		// still a faithful window.
		return nil, pathError("read", rel, err)
	}
	res.Data = buf[:n]
	res.Truncated = offset+int64(n) < res.Size
	return res, nil
}

// WriteFile replaces the content of rel with data, creating missing parent
// directories (0755) inside the workspace. The write is atomic and durable: a
// temporary file in the same directory is written and fsynced, renamed over
// the destination, and the directory is fsynced. An existing regular file
// keeps its permission bits (an executable script stays executable); a new
// file gets 0644 minus the umask.
//
// If rel is a symlink, the write goes to its target, as a shell redirection
// would, provided the target is inside the workspace; a symlink (of rel or of
// a parent directory) that leads outside is refused with an *EscapeError.
func (d *Dir) WriteFile(rel string, data []byte) error {
	return d.writeFile(rel, data, nil)
}

// commitCheck decides, once the new content is written and synced beside
// the destination, whether it replaces it: it returns nil to go on, and
// createOnly to put it in place only where nothing is (a link, which
// fails if a file appeared meanwhile, rather than a rename over it).
type commitCheck func(dest string) (createOnly bool, err error)

// writeFile is WriteFile, asking check (when not nil) right before the
// new content replaces the old: the slow part (writing and syncing it) is
// over by then, so what check saw is what is replaced.
func (d *Dir) writeFile(rel string, data []byte, check commitCheck) error {
	c, err := cleanFilePath(rel)
	if err != nil {
		return err
	}
	if err := d.mkdirParents(rel, c); err != nil {
		return err
	}
	dest, err := d.resolveLinks(rel, c)
	if err != nil {
		return err
	}
	if dest != c {
		if err := d.mkdirParents(rel, dest); err != nil {
			return err
		}
	}
	dir := filepath.Dir(dest)

	perm := fs.FileMode(0o644)
	switch fi, err := d.root.Lstat(dest); {
	case err == nil && fi.IsDir():
		return fmt.Errorf("write %q: is a directory", rel)
	case err == nil && fi.Mode().IsRegular():
		perm = fi.Mode().Perm()
	case err == nil:
		return fmt.Errorf("write %q: not a regular file (%s)", rel, fi.Mode().Type())
	case !errors.Is(err, fs.ErrNotExist):
		return pathError("write", rel, err)
	}

	// The temporary name does not derive from the destination's name, which
	// could be close to the file name length limit.
	tmp := filepath.Join(dir, "."+rand.Text()+".tmp")
	if d.onTemp != nil {
		slash := filepath.ToSlash(tmp)
		d.onTemp(slash)
		// Deferred before the cleanup below, so run after it: the
		// second call comes once the file is renamed or removed.
		defer d.onTemp(slash)
	}
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return pathError("write", rel, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = f.Close()
			_ = d.root.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return pathError("write", rel, err)
	}
	// OpenFile's mode is filtered by the umask; an existing file's bits are
	// restored exactly.
	if err := f.Chmod(perm); err != nil {
		return pathError("write", rel, err)
	}
	if err := f.Sync(); err != nil {
		return pathError("write", rel, err)
	}
	if err := f.Close(); err != nil {
		return pathError("write", rel, err)
	}
	createOnly := false
	if check != nil {
		if createOnly, err = check(dest); err != nil {
			return err
		}
	}
	if createOnly {
		// A file a program created since the check is kept: the link
		// fails rather than replace it.
		if err := d.root.Link(tmp, dest); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return errAppeared
			}
			return pathError("write", rel, err)
		}
		_ = d.root.Remove(tmp)
	} else if err := d.root.Rename(tmp, dest); err != nil {
		return pathError("write", rel, err)
	}
	committed = true
	return d.syncDir(dir, rel)
}

// syncDir fsyncs directory dir so a rename into it survives a crash.
func (d *Dir) syncDir(dir, rel string) error {
	df, err := d.root.Open(dir)
	if err != nil {
		return pathError("write", rel, err)
	}
	defer df.Close()
	if err := df.Sync(); err != nil {
		return pathError("write", rel, err)
	}
	return nil
}

// mkdirParents creates the parent directories of the clean path c.
func (d *Dir) mkdirParents(rel, c string) error {
	dir := filepath.Dir(c)
	if dir == "." {
		return nil
	}
	err := d.root.MkdirAll(dir, 0o755)
	switch {
	case err == nil:
		return nil
	case escapes(err):
		return pathError("write", rel, err)
	case errors.Is(err, fs.ErrExist):
		// MkdirAll met a non-directory where a directory must be.
		return fmt.Errorf("write %q: a parent of it is not a directory: %w", rel, err)
	default:
		return pathError("write", rel, err)
	}
}

// maxLinkHops bounds symlink chains, like the kernel's ELOOP limit.
const maxLinkHops = 40

// resolveLinks follows symlinks in the last component of the clean path c
// and returns the workspace-relative path of the final target (which may not
// exist yet: writing through a dangling link creates its target). A link
// whose target is absolute or climbs out of the workspace is an
// *EscapeError.
//
// Targets are joined to the link's directory lexically. That is wrong only
// when the link's directory is itself reached through a symlink and the
// target contains "..": when the target exists, the result is checked to be
// the same file os.Root reaches through the link, and a mismatch is refused
// rather than guessed. Either way the result never leaves the workspace.
func (d *Dir) resolveLinks(rel, c string) (string, error) {
	p := c
	for hop := 0; ; hop++ {
		fi, err := d.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", pathError("write", rel, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			break
		}
		if hop == maxLinkHops {
			return "", fmt.Errorf("write %q: too many levels of symbolic links", rel)
		}
		target, err := d.root.Readlink(p)
		if err != nil {
			return "", pathError("write", rel, err)
		}
		if filepath.IsAbs(target) {
			return "", &EscapeError{Path: rel, Reason: "through a symlink"}
		}
		next, err := CleanPath(filepath.Join(filepath.Dir(p), target))
		if err != nil || next == "." {
			return "", &EscapeError{Path: rel, Reason: "through a symlink"}
		}
		p = next
	}
	if p == c {
		return c, nil
	}
	viaLink, err := d.root.Stat(c)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", pathError("write", rel, err)
	}
	if err == nil {
		direct, err := d.root.Lstat(p)
		if err != nil || !os.SameFile(viaLink, direct) {
			return "", fmt.Errorf("write %q: cannot resolve its symlink target; write to the target path instead", rel)
		}
	}
	return p, nil
}
