package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strings"
	"unicode/utf8"
)

// Entry types.
const (
	TypeDir     = "dir"
	TypeFile    = "file"
	TypeSymlink = "symlink"
)

// formatVersion is the "v" of every tree blob this package writes.
const formatVersion = 1

// maxDepth bounds how deep a snapshot's directories nest, on both sides: a
// workspace nested deeper is refused by Take, and a stored tree that claims
// more levels is refused by Restore and Load (it cannot have come from
// Take).
const maxDepth = 1024

// isWindows: there "\\" and ":" also separate path components.
const isWindows = runtime.GOOS == "windows"

// maxTargetLen bounds a symlink target (PATH_MAX on Linux).
const maxTargetLen = 4096

// Chunk is one piece of a file's content, stored as the blob named by its
// SHA-256.
type Chunk struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Manifest lists everything a snapshot holds, flattened from its trees:
// every directory (the root itself excepted), regular file and symlink. The
// order is depth first with each directory's entries sorted by name, so a
// directory comes right before its contents.
type Manifest struct {
	// ID is the snapshot id: the SHA-256 of the root tree blob.
	ID string `json:"id"`
	// Exclude are the path prefixes Take was told to leave out; Restore
	// neither writes nor removes them.
	Exclude []string `json:"exclude,omitempty"`
	Entries []Entry  `json:"entries"`
}

// Entry is one item of a Manifest.
type Entry struct {
	// Path is relative to the workspace root, with "/" separators.
	Path string `json:"path"`
	// Type is TypeDir, TypeFile or TypeSymlink.
	Type string `json:"type"`
	// Mode holds the permission bits (0 to 0777) of a file or directory.
	// Setuid, setgid and sticky bits are never recorded.
	Mode fs.FileMode `json:"mode"`
	// Size is a file's length in bytes.
	Size int64 `json:"size,omitempty"`
	// SHA256 is the digest of a file's whole content; for a directory,
	// the digest of its tree blob.
	SHA256 string `json:"sha256,omitempty"`
	// Chunks are a file's content, in order. A file of one chunk (the
	// blob named SHA256) or of none (an empty file) has no Chunks.
	Chunks []Chunk `json:"chunks,omitempty"`
	// Target is a symlink's target, exactly as stored in the link.
	Target string `json:"target,omitempty"`
}

// tree is the stored form of one directory: a canonical JSON blob. The
// encoding is canonical because Take builds it from sorted entries with
// fixed field order and no optional variation, so an unchanged directory
// always yields the same bytes, hence the same digest, and is stored once
// however many snapshots contain it.
type tree struct {
	V int `json:"v"`
	// Exclude is set on the root tree only.
	Exclude []string    `json:"exclude,omitempty"`
	Entries []treeEntry `json:"entries"`
}

// treeEntry is one child of a directory. Names and targets that are not
// valid UTF-8 (which JSON cannot carry) are stored base64-encoded in the
// *B64 fields instead.
type treeEntry struct {
	Name      string  `json:"name,omitempty"`
	NameB64   string  `json:"name_base64,omitempty"`
	Type      string  `json:"type"`
	Mode      uint32  `json:"mode,omitempty"`
	Size      int64   `json:"size,omitempty"`
	SHA256    string  `json:"sha256,omitempty"` // file: content digest
	Chunks    []Chunk `json:"chunks,omitempty"` // file of two chunks or more
	Tree      string  `json:"tree,omitempty"`   // dir: digest of its tree
	Target    string  `json:"target,omitempty"`
	TargetB64 string  `json:"target_base64,omitempty"`
}

// name returns the entry's decoded name.
func (e *treeEntry) name() (string, error) {
	return decodeText("name", e.Name, e.NameB64)
}

// target returns the entry's decoded symlink target.
func (e *treeEntry) target() (string, error) {
	return decodeText("target", e.Target, e.TargetB64)
}

func decodeText(field, plain, b64 string) (string, error) {
	switch {
	case plain != "" && b64 != "":
		return "", fmt.Errorf("both %s and %s_base64 are set", field, field)
	case b64 != "":
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return "", fmt.Errorf("%s_base64: %w", field, err)
		}
		return string(raw), nil
	default:
		return plain, nil
	}
}

// encodeText sets the plain or the base64 field of a name or target.
func encodeText(s string, plain, b64 *string) {
	if utf8.ValidString(s) {
		*plain = s
	} else {
		*b64 = base64.StdEncoding.EncodeToString([]byte(s))
	}
}

// encodeTree returns the canonical bytes of t and their digest.
func encodeTree(t *tree) ([]byte, string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(t); err != nil {
		return nil, "", fmt.Errorf("encode tree: %w", err)
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return data, sha256Hex(data), nil
}

// decodeTree parses and validates a tree blob. root says whether it is the
// root tree (the only one that may carry Exclude).
func decodeTree(data []byte, root bool) (*tree, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t tree
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("decode tree: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode tree: trailing data after the tree")
	}
	if t.V != formatVersion {
		return nil, fmt.Errorf("tree format version %d is not supported (want %d)", t.V, formatVersion)
	}
	if len(t.Exclude) > 0 {
		if !root {
			return nil, errors.New("exclude is set on a tree that is not the root")
		}
		if _, err := cleanExcludes(t.Exclude); err != nil {
			return nil, err
		}
	}
	prev := ""
	for i := range t.Entries {
		e := &t.Entries[i]
		name, err := e.name()
		if err != nil {
			return nil, fmt.Errorf("entries[%d]: %w", i, err)
		}
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("entries[%d]: %w", i, err)
		}
		if i > 0 && name <= prev {
			return nil, fmt.Errorf("entries[%d]: name %q is not after %q: entries must be sorted and unique", i, name, prev)
		}
		prev = name
		if err := checkEntry(e); err != nil {
			return nil, fmt.Errorf("entry %q: %w", name, err)
		}
	}
	return &t, nil
}

// checkName refuses a name that is not a single path component: empty,
// ".", "..", or containing a separator or NUL. This is what keeps a
// restore inside its root whatever a stored tree says.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("name %q is not allowed", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("name %q contains a path separator or NUL", name)
	case isWindows && strings.ContainsAny(name, `\:`):
		return fmt.Errorf("name %q contains a path separator", name)
	}
	return nil
}

func checkEntry(e *treeEntry) error {
	switch e.Type {
	case TypeDir:
		if e.Mode > 0o777 {
			return fmt.Errorf("mode %#o has bits other than permissions", e.Mode)
		}
		if err := checkDigest("tree", e.Tree); err != nil {
			return err
		}
		if e.Size != 0 || e.SHA256 != "" || e.Chunks != nil || e.Target != "" || e.TargetB64 != "" {
			return errors.New("a directory has only a mode and a tree")
		}
	case TypeFile:
		if e.Mode > 0o777 {
			return fmt.Errorf("mode %#o has bits other than permissions", e.Mode)
		}
		if e.Size < 0 {
			return fmt.Errorf("size %d is negative", e.Size)
		}
		if err := checkDigest("sha256", e.SHA256); err != nil {
			return err
		}
		if e.Tree != "" || e.Target != "" || e.TargetB64 != "" {
			return errors.New("a file has no tree or target")
		}
		if len(e.Chunks) == 1 {
			return errors.New("a file of one chunk is stored as its sha256, without chunks")
		}
		var sum int64
		for i, c := range e.Chunks {
			if err := checkDigest(fmt.Sprintf("chunks[%d].sha256", i), c.SHA256); err != nil {
				return err
			}
			if c.Size <= 0 {
				return fmt.Errorf("chunks[%d].size %d is not positive", i, c.Size)
			}
			sum += c.Size
			if sum < 0 || sum > e.Size {
				return fmt.Errorf("chunks add up to more than size %d", e.Size)
			}
		}
		if len(e.Chunks) > 0 && sum != e.Size {
			return fmt.Errorf("chunks add up to %d bytes, not size %d", sum, e.Size)
		}
	case TypeSymlink:
		target, err := e.target()
		if err != nil {
			return err
		}
		switch {
		case target == "":
			return errors.New("target is empty")
		case len(target) > maxTargetLen:
			return fmt.Errorf("target is longer than %d bytes", maxTargetLen)
		case strings.IndexByte(target, 0) >= 0:
			return errors.New("target contains NUL")
		}
		if e.Mode != 0 || e.Size != 0 || e.SHA256 != "" || e.Chunks != nil || e.Tree != "" {
			return errors.New("a symlink has only a target")
		}
	default:
		return fmt.Errorf("type %q is not dir, file or symlink", e.Type)
	}
	return nil
}

// chunks returns the blobs that make up a validated file entry.
func (e *treeEntry) chunks() []Chunk {
	switch {
	case len(e.Chunks) > 0:
		return e.Chunks
	case e.Size == 0:
		return nil
	default:
		return []Chunk{{SHA256: e.SHA256, Size: e.Size}}
	}
}

// checkDigest requires a lowercase hex SHA-256.
func checkDigest(field, d string) error {
	if len(d) != sha256.Size*2 {
		return fmt.Errorf("%s must be 64 lowercase hex digits, got %q", field, d)
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%s must be 64 lowercase hex digits, got %q", field, d)
		}
	}
	return nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// cleanExcludes validates exclusion prefixes: relative, "/"-separated,
// clean, not "." and not climbing out. It returns them sorted and without
// duplicates, so the root tree's encoding does not depend on their order.
func cleanExcludes(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for i, p := range in {
		c := path.Clean(p)
		switch {
		case p == "" || strings.IndexByte(p, 0) >= 0:
			return nil, fmt.Errorf("exclude[%d] %q is empty or contains NUL", i, p)
		case path.IsAbs(p) || c == ".." || strings.HasPrefix(c, "../"):
			return nil, fmt.Errorf("exclude[%d] %q must be a path relative to the workspace, inside it", i, p)
		case c == ".":
			return nil, fmt.Errorf("exclude[%d] %q would exclude the whole workspace", i, p)
		case c != p:
			return nil, fmt.Errorf("exclude[%d] %q is not clean (want %q)", i, p, c)
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// excluded reports whether rel (a "/"-separated path) is one of the
// prefixes or lies under one.
func excluded(excludes []string, rel string) bool {
	for _, p := range excludes {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// holdsExcluded reports whether some prefix lies strictly under rel, so
// removing rel whole would remove an excluded path.
func holdsExcluded(excludes []string, rel string) bool {
	for _, p := range excludes {
		if rel == "." || strings.HasPrefix(p, rel+"/") {
			return true
		}
	}
	return false
}

// loadTree fetches and validates the tree blob d, checking that its bytes
// hash to d (a store that returned other bytes would otherwise restore
// something else than what was snapshotted).
func loadTree(ctx context.Context, b Blobs, d string, root bool) (*tree, error) {
	data, err := b.BlobGet(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("get tree %s: %w", d, err)
	}
	if got := sha256Hex(data); got != d {
		return nil, fmt.Errorf("tree %s: the store returned bytes whose sha256 is %s", d, got)
	}
	t, err := decodeTree(data, root)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", d, err)
	}
	return t, nil
}

// Load reads the snapshot id and returns its flattened Manifest, after
// validating every tree as Restore does.
func Load(ctx context.Context, b Blobs, id string) (*Manifest, error) {
	if err := checkDigest("snapshot id", id); err != nil {
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	root, err := loadTree(ctx, b, id, true)
	if err != nil {
		return nil, fmt.Errorf("load snapshot %s: %w", id, err)
	}
	m := &Manifest{ID: id, Exclude: root.Exclude, Entries: []Entry{}}
	if err := flatten(ctx, b, root, "", 0, m); err != nil {
		return nil, fmt.Errorf("load snapshot %s: %w", id, err)
	}
	return m, nil
}

// flatten appends t's entries under prefix to m, depth first. Visiting a
// directory's entries in name order and descending into each directory
// right after it yields paths sorted by the bytes of their components.
func flatten(ctx context.Context, b Blobs, t *tree, prefix string, depth int, m *Manifest) error {
	if depth >= maxDepth {
		return fmt.Errorf("directories nest deeper than %d levels at %q", maxDepth, prefix)
	}
	for i := range t.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		te := &t.Entries[i]
		name, _ := te.name() // validated by decodeTree
		p := name
		if prefix != "" {
			p = prefix + "/" + name
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
		m.Entries = append(m.Entries, e)
		if te.Type == TypeDir {
			sub, err := loadTree(ctx, b, te.Tree, false)
			if err != nil {
				return fmt.Errorf("directory %q: %w", p, err)
			}
			if err := flatten(ctx, b, sub, p, depth+1, m); err != nil {
				return err
			}
		}
	}
	return nil
}
