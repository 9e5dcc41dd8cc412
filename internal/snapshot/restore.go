package snapshot

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// restoreTempPrefix starts the names of the files Restore writes before
// renaming them into place. One left behind by a crash is not in any
// snapshot, so the next Restore removes it.
const restoreTempPrefix = ".longhaul-restore-"

// Restore makes the directory root hold exactly the snapshot id: it creates
// root (0700) if needed, writes the files, directories and symlinks that
// are missing or differ, removes what the snapshot does not have (except
// excluded paths, which it leaves alone), and sets permission bits. A restore
// into an existing directory therefore converges on the snapshot, and one
// interrupted midway is completed by running it again.
//
// Nothing is written outside root: every operation goes through an os.Root
// opened on it, every name of every tree is checked to be a single path
// component before use, and symlinks are created as stored but never
// followed (a file is written to a temporary name in its directory and
// renamed over whatever was there). Every blob is checked against its
// digest, so a store that returned other bytes fails the restore instead of
// corrupting the workspace. Modification times are not restored.
func Restore(ctx context.Context, b Blobs, id string, root string) (Stats, error) {
	if b == nil {
		return Stats{}, errors.New("restore snapshot: blobs is nil")
	}
	if err := checkDigest("snapshot id", id); err != nil {
		return Stats{}, fmt.Errorf("restore snapshot: %w", err)
	}
	top, err := loadTree(ctx, b, id, true)
	if err != nil {
		return Stats{}, fmt.Errorf("restore snapshot %s: %w", id, err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return Stats{}, fmt.Errorf("restore snapshot %s: create workspace: %w", id, stripPath(err))
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return Stats{}, fmt.Errorf("restore snapshot %s: open workspace: %w", id, stripPath(err))
	}
	defer r.Close()
	rs := &restorer{ctx: ctx, b: b, root: r, excludes: top.Exclude}
	if err := rs.dir(".", top, 0); err != nil {
		return rs.st, fmt.Errorf("restore snapshot %s: %w", id, err)
	}
	return rs.st, nil
}

type restorer struct {
	ctx      context.Context
	b        Blobs
	root     *os.Root
	excludes []string
	st       Stats
}

// dir makes directory rel (which exists and is a directory) hold exactly
// the entries of t.
func (rs *restorer) dir(rel string, t *tree, depth int) error {
	if depth >= maxDepth {
		return fmt.Errorf("directory %q: directories nest deeper than %d levels", rel, maxDepth)
	}
	want := make(map[string]*treeEntry, len(t.Entries))
	for i := range t.Entries {
		name, _ := t.Entries[i].name() // validated by decodeTree
		want[name] = &t.Entries[i]
	}
	names, err := readDirNames(rs.root, rel)
	if err != nil {
		return pathErr("list", rel, err)
	}
	for _, name := range names {
		if _, ok := want[name]; ok {
			continue
		}
		if err := rs.removeExtra(joinRel(rel, name)); err != nil {
			return err
		}
	}
	for i := range t.Entries {
		if err := rs.ctx.Err(); err != nil {
			return err
		}
		te := &t.Entries[i]
		name, _ := te.name()
		p := joinRel(rel, name)
		if excluded(rs.excludes, p) {
			return fmt.Errorf("entry %q is under an excluded path: the snapshot is inconsistent", p)
		}
		fi, err := rs.root.Lstat(filepath.FromSlash(p))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fi = nil
		case err != nil:
			return pathErr("stat", p, err)
		}
		switch te.Type {
		case TypeDir:
			err = rs.restoreDir(p, te, fi, depth)
		case TypeFile:
			err = rs.restoreFile(p, te, fi)
		case TypeSymlink:
			err = rs.restoreSymlink(p, te, fi)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (rs *restorer) restoreDir(p string, te *treeEntry, fi fs.FileInfo, depth int) error {
	sub, err := loadTree(rs.ctx, rs.b, te.Tree, false)
	if err != nil {
		return fmt.Errorf("directory %q: %w", p, err)
	}
	osp := filepath.FromSlash(p)
	if fi != nil && !fi.IsDir() {
		if err := rs.removeAll(p); err != nil {
			return err
		}
		fi = nil
	}
	if fi == nil {
		if err := rs.root.Mkdir(osp, 0o700); err != nil {
			return pathErr("create directory", p, err)
		}
	} else if fi.Mode().Perm()&0o700 != 0o700 {
		// Its entries must be listable and writable while they are
		// restored; its own mode is set afterwards.
		if err := rs.root.Chmod(osp, fi.Mode().Perm()|0o700); err != nil {
			return pathErr("chmod", p, err)
		}
	}
	if err := rs.dir(p, sub, depth+1); err != nil {
		return err
	}
	if err := rs.root.Chmod(osp, fs.FileMode(te.Mode)); err != nil {
		return pathErr("chmod", p, err)
	}
	rs.st.Dirs++
	return nil
}

func (rs *restorer) restoreFile(p string, te *treeEntry, fi fs.FileInfo) error {
	rs.st.Files++
	rs.st.Bytes += te.Size
	mode := fs.FileMode(te.Mode)
	if fi != nil && fi.Mode().IsRegular() && fi.Size() == te.Size {
		same, err := rs.sameContent(p, te.SHA256)
		if err != nil {
			return err
		}
		if same {
			if fi.Mode().Perm() != mode {
				if err := rs.root.Chmod(filepath.FromSlash(p), mode); err != nil {
					return pathErr("chmod", p, err)
				}
			}
			return nil
		}
	}
	if fi != nil && fi.IsDir() {
		if err := rs.removeAll(p); err != nil {
			return err
		}
	}
	return rs.writeFile(p, te)
}

// sameContent reports whether the regular file p hashes to sha.
func (rs *restorer) sameContent(p, sha string) (bool, error) {
	f, err := rs.root.OpenFile(filepath.FromSlash(p), readFlags, 0)
	if err != nil {
		return false, pathErr("open", p, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	rs.st.ReadBytes += n
	if err != nil {
		return false, pathErr("read", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)) == sha, nil
}

// writeFile writes te's content to a temporary file in p's directory and
// renames it over p. A rename replaces a symlink at p, never its target.
func (rs *restorer) writeFile(p string, te *treeEntry) (err error) {
	tmp := filepath.FromSlash(joinRel(path.Dir(p), restoreTempPrefix+rand.Text()))
	f, err := rs.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return pathErr("write", p, err)
	}
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		if err != nil {
			_ = rs.root.Remove(tmp)
		}
	}()
	whole := sha256.New()
	for i, c := range te.chunks() {
		data, err := rs.b.BlobGet(rs.ctx, c.SHA256)
		if err != nil {
			return fmt.Errorf("file %q: get chunk %d (%s): %w", p, i, c.SHA256, err)
		}
		if int64(len(data)) != c.Size || sha256Hex(data) != c.SHA256 {
			return fmt.Errorf("file %q: chunk %d: the store returned other bytes than blob %s", p, i, c.SHA256)
		}
		if _, err := f.Write(data); err != nil {
			return pathErr("write", p, err)
		}
		whole.Write(data)
	}
	if got := hex.EncodeToString(whole.Sum(nil)); got != te.SHA256 {
		return fmt.Errorf("file %q: its chunks hash to %s, not to its sha256 %s", p, got, te.SHA256)
	}
	// OpenFile's mode was filtered by the umask; this one is exact.
	if err := f.Chmod(fs.FileMode(te.Mode)); err != nil {
		return pathErr("chmod", p, err)
	}
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return pathErr("write", p, cerr)
	}
	if err := rs.root.Rename(tmp, filepath.FromSlash(p)); err != nil {
		return pathErr("write", p, err)
	}
	rs.st.Written++
	rs.st.WrittenBytes += te.Size
	return nil
}

func (rs *restorer) restoreSymlink(p string, te *treeEntry, fi fs.FileInfo) error {
	rs.st.Symlinks++
	target, _ := te.target()
	osp := filepath.FromSlash(p)
	if fi != nil && fi.Mode()&fs.ModeSymlink != 0 {
		if have, err := rs.root.Readlink(osp); err == nil && have == target {
			return nil
		}
	}
	if fi != nil {
		if err := rs.removeAll(p); err != nil {
			return err
		}
	}
	if err := rs.root.Symlink(target, osp); err != nil {
		return pathErr("create symlink", p, err)
	}
	return nil
}

// removeExtra removes p, which the snapshot does not have, unless it is
// excluded; a directory that holds excluded paths is emptied of the rest
// and kept.
func (rs *restorer) removeExtra(p string) error {
	if excluded(rs.excludes, p) {
		return nil
	}
	if holdsExcluded(rs.excludes, p) {
		fi, err := rs.root.Lstat(filepath.FromSlash(p))
		if err != nil {
			return pathErr("stat", p, err)
		}
		if fi.IsDir() {
			names, err := readDirNames(rs.root, p)
			if err != nil {
				return pathErr("list", p, err)
			}
			for _, name := range names {
				if err := rs.removeExtra(joinRel(p, name)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if err := rs.removeAll(p); err != nil {
		return err
	}
	rs.st.Removed++
	return nil
}

// removeAll removes p and everything under it. Directories without write
// permission (a Go module cache has many) are made writable first when the
// plain removal is refused.
func (rs *restorer) removeAll(p string) error {
	osp := filepath.FromSlash(p)
	err := rs.root.RemoveAll(osp)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		if err != nil {
			return pathErr("remove", p, err)
		}
		return nil
	}
	if err := rs.makeWritable(p, 0); err != nil {
		return err
	}
	if err := rs.root.RemoveAll(osp); err != nil {
		return pathErr("remove", p, err)
	}
	return nil
}

// makeWritable gives the owner full permission on every directory at or
// under p (never following symlinks).
func (rs *restorer) makeWritable(p string, depth int) error {
	if depth >= maxDepth {
		return fmt.Errorf("remove %q: directories nest deeper than %d levels", p, maxDepth)
	}
	osp := filepath.FromSlash(p)
	fi, err := rs.root.Lstat(osp)
	if err != nil || !fi.IsDir() {
		return nil // gone, or nothing to make writable
	}
	if err := rs.root.Chmod(osp, fi.Mode().Perm()|0o700); err != nil {
		return pathErr("chmod", p, err)
	}
	names, err := readDirNames(rs.root, p)
	if err != nil {
		return pathErr("list", p, err)
	}
	for _, name := range names {
		if err := rs.makeWritable(joinRel(p, name), depth+1); err != nil {
			return err
		}
	}
	return nil
}
