package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrEscapes is matched (with errors.Is) by every error about a path that
// leaves the workspace, whether lexically ("..", absolute) or through a
// symlink.
var ErrEscapes = errors.New("path leaves the workspace")

// ErrInvalidPath is matched by errors about a path that is malformed (empty,
// or containing a NUL byte) or that names the workspace itself where a file
// is required.
var ErrInvalidPath = errors.New("invalid path")

// EscapeError says that Path leaves the workspace.
type EscapeError struct {
	// Path is the path as the caller gave it.
	Path string
	// Reason says how, when it adds anything ("absolute path", "through a
	// symlink").
	Reason string
}

func (e *EscapeError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("path %q leaves the workspace", e.Path)
	}
	return fmt.Sprintf("path %q leaves the workspace (%s)", e.Path, e.Reason)
}

// Is makes errors.Is(err, ErrEscapes) true.
func (e *EscapeError) Is(target error) bool { return target == ErrEscapes }

// CleanPath validates a workspace-relative path and returns its clean form.
// "." (the workspace itself) is allowed; callers that need a file check for
// it. Absolute paths and paths that climb above the workspace are refused
// with an *EscapeError. The check is lexical; symlinks are dealt with when
// the path is used, by os.Root.
func CleanPath(rel string) (string, error) {
	if rel == "" {
		return "", fmt.Errorf("path is empty: %w", ErrInvalidPath)
	}
	if strings.IndexByte(rel, 0) >= 0 {
		return "", fmt.Errorf("path %q contains a NUL byte: %w", rel, ErrInvalidPath)
	}
	if filepath.IsAbs(rel) {
		return "", &EscapeError{Path: rel, Reason: "absolute path; paths are relative to the workspace"}
	}
	c := filepath.Clean(rel)
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", &EscapeError{Path: rel}
	}
	return c, nil
}

// cleanFilePath is CleanPath for operations that need an entry inside the
// workspace, not the workspace directory itself.
func cleanFilePath(rel string) (string, error) {
	c, err := CleanPath(rel)
	if err != nil {
		return "", err
	}
	if c == "." {
		return "", fmt.Errorf("path %q names the workspace directory itself: %w", rel, ErrInvalidPath)
	}
	return c, nil
}

// Dir is an open workspace directory. All its methods resolve paths through
// an os.Root, so they cannot reach outside the directory. A Dir is safe for
// concurrent use; Close it when done.
type Dir struct {
	path string
	root *os.Root
	// onTemp is told of the temporary files of writes (OnTempFiles).
	onTemp func(rel string)
}

// Open opens the workspace directory dir (which must exist).
func Open(dir string) (*Dir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return &Dir{path: abs, root: root}, nil
}

// Path returns the absolute path of the workspace directory.
func (d *Dir) Path() string { return d.path }

// OnTempFiles has fn told the path (workspace-relative, "/"-separated) of
// each temporary file a write of d makes beside its destination: once
// before the file is created and again once it is gone, renamed or
// removed, whether the write succeeded or not. A snapshot cache told only
// of the destination would keep a temporary file that a walk of the
// directory met meanwhile, in every snapshot after; told of both, it reads
// both again. Set it before d is used; fn may be called by overlapping
// writes at once.
func (d *Dir) OnTempFiles(fn func(rel string)) { d.onTemp = fn }

// Close releases the directory handle.
func (d *Dir) Close() error { return d.root.Close() }

// errPathEscapesText is the message of os's unexported errPathEscapes, which
// os.Root returns (inside an *os.PathError) when a path resolves outside the
// root, for instance through a symlink. The os package does not export the
// sentinel, so it is recognised by its text; TestConfinement fails if that
// ever changes.
const errPathEscapesText = "path escapes from parent"

// escapes reports whether err, from an os.Root operation, says that the
// path resolved outside the root.
func escapes(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == errPathEscapesText {
			return true
		}
	}
	return false
}

// pathError turns an error of an os.Root operation on rel into one whose
// message names only rel: an *EscapeError if the path left the root,
// otherwise "op "rel": cause" with the operation and path that os wrapped
// around the cause (which may be nested) stripped. The cause stays in the
// chain, so errors.Is(err, fs.ErrNotExist) still works.
func pathError(op, rel string, err error) error {
	if escapes(err) {
		return &EscapeError{Path: rel, Reason: "through a symlink"}
	}
	cause := err
	for {
		var pe *os.PathError
		var le *os.LinkError
		switch {
		case errors.As(cause, &pe) && pe.Err != nil:
			cause = pe.Err
			continue
		case errors.As(cause, &le) && le.Err != nil:
			cause = le.Err
			continue
		}
		break
	}
	return fmt.Errorf("%s %q: %w", op, rel, cause)
}
