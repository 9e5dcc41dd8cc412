package tool

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// File tool limits.
const (
	// DefaultReadLimit is how many bytes read_file returns when the call
	// gives no limit.
	DefaultReadLimit = 256 << 10
	// MaxReadLimit is the largest limit read_file accepts.
	MaxReadLimit = 1 << 20
)

var readFileSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path relative to the workspace."},
    "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start reading at (default 0)."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 1048576, "description": "Maximum number of bytes to return (default 262144)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`)

var writeFileSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path relative to the workspace; missing directories are created."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`)

var listFilesSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "default": ".", "description": "Directory path relative to the workspace (default \".\")."}
  },
  "additionalProperties": false
}`)

// ReadFile is the read_file built-in. The zero value is ready to use.
type ReadFile struct{}

// ReadFileOutput is the output of read_file.
type ReadFileOutput struct {
	Path string `json:"path"`
	// Content is the text read, or its base64 form when Encoding is
	// "base64" (the bytes are not UTF-8).
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
	// Size is the size of the whole file.
	Size int64 `json:"size"`
	// Truncated is true when the file goes on after the returned bytes;
	// NextOffset is then where to continue.
	Truncated  bool  `json:"truncated"`
	NextOffset int64 `json:"next_offset,omitempty"`
}

// Name implements Tool.
func (*ReadFile) Name() string { return "read_file" }

// Description implements Tool.
func (*ReadFile) Description() string {
	return "Read a file of the workspace. Returns at most limit bytes from offset; " +
		"binary content is returned base64-encoded."
}

// Parameters implements Tool.
func (*ReadFile) Parameters() json.RawMessage { return clone(readFileSchema) }

// Effect implements Tool.
func (*ReadFile) Effect() lt.EffectClass { return lt.EffectRead }

// Run implements Tool.
func (t *ReadFile) Run(ctx context.Context, call *Call) (*Result, error) {
	var args struct {
		Path   string      `json:"path"`
		Offset json.Number `json:"offset"`
		Limit  json.Number `json:"limit"`
	}
	if res := decodeArguments(t, call, &args); res != nil {
		return res, nil
	}
	var offset int64
	limit := int64(DefaultReadLimit)
	if args.Offset != "" {
		v, err := intArgument("offset", args.Offset)
		if err != nil {
			return &Result{Error: err.Error()}, nil
		}
		offset = v
	}
	if args.Limit != "" {
		v, err := intArgument("limit", args.Limit)
		if err != nil {
			return &Result{Error: err.Error()}, nil
		}
		limit = v
	}
	// The operator's output bound applies to file content too.
	if call.MaxOutputBytes > 0 {
		limit = min(limit, int64(call.MaxOutputBytes))
	}
	f, done, err := callFiles(call)
	if err != nil {
		return nil, err
	}
	defer done()
	r, err := f.ReadFile(ctx, args.Path, offset, limit)
	if err != nil {
		return fileError(err)
	}

	window := r.Data
	if r.Truncated {
		// The limit may have cut a character in two; end the window
		// before it so text stays text and the next read starts on it.
		if trimmed := trimPartialRune(window); len(trimmed) > 0 && utf8.Valid(trimmed) {
			window = trimmed
		}
	}
	out := &ReadFileOutput{Path: r.Path, Size: r.Size}
	if utf8.Valid(window) {
		out.Content = string(window)
	} else {
		window = r.Data
		out.Content = base64.StdEncoding.EncodeToString(window)
		out.Encoding = "base64"
	}
	end := offset + int64(len(window))
	out.Truncated = end < r.Size
	if out.Truncated {
		out.NextOffset = end
	}
	return &Result{Output: out}, nil
}

// WriteFile is the write_file built-in. It is idempotent: writing the same
// content to the same path twice leaves the same file and returns the same
// output. The zero value is ready to use.
type WriteFile struct{}

// WriteFileOutput is the output of write_file.
type WriteFileOutput struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
	// SHA256 is the hex digest of the content written.
	SHA256 string `json:"sha256"`
}

// Name implements Tool.
func (*WriteFile) Name() string { return "write_file" }

// Description implements Tool.
func (*WriteFile) Description() string {
	return "Create or replace a file of the workspace with the given content, creating missing directories."
}

// Parameters implements Tool.
func (*WriteFile) Parameters() json.RawMessage { return clone(writeFileSchema) }

// Effect implements Tool.
func (*WriteFile) Effect() lt.EffectClass { return lt.EffectIdempotent }

// Run implements Tool.
func (t *WriteFile) Run(ctx context.Context, call *Call) (*Result, error) {
	var args struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if res := decodeArguments(t, call, &args); res != nil {
		return res, nil
	}
	f, done, err := callFiles(call)
	if err != nil {
		return nil, err
	}
	defer done()
	data := []byte(args.Content)
	if err := checkDiskQuota(call, int64(len(data))); err != nil {
		return &Result{Error: fmt.Sprintf("write %q: %v", args.Path, err)}, nil
	}
	if err := f.WriteFile(ctx, args.Path, data); err != nil {
		return fileError(err)
	}
	clean, _ := workspace.CleanPath(args.Path) // WriteFile accepted it
	return &Result{Output: &WriteFileOutput{Path: clean, Bytes: len(data), SHA256: sha256Hex(data)}}, nil
}

// ListFiles is the list_files built-in. The zero value is ready to use.
type ListFiles struct {
	// Max is the most entries returned (default workspace.DefaultListMax).
	Max int
}

// ListFilesOutput is the output of list_files.
type ListFilesOutput struct {
	Path string `json:"path"`
	// Entries are sorted by name; symlinks are listed, not followed.
	Entries []workspace.Entry `json:"entries"`
	// Total is the number of entries in the directory; Truncated is true
	// when not all of them are in Entries.
	Total     int  `json:"total"`
	Truncated bool `json:"truncated"`
}

// Name implements Tool.
func (*ListFiles) Name() string { return "list_files" }

// Description implements Tool.
func (*ListFiles) Description() string {
	return "List a directory of the workspace: name, type (file, dir, symlink, other) and size of each entry, sorted by name."
}

// Parameters implements Tool.
func (*ListFiles) Parameters() json.RawMessage { return clone(listFilesSchema) }

// Effect implements Tool.
func (*ListFiles) Effect() lt.EffectClass { return lt.EffectRead }

// Run implements Tool.
func (t *ListFiles) Run(ctx context.Context, call *Call) (*Result, error) {
	var args struct {
		Path string `json:"path"`
	}
	if res := decodeArguments(t, call, &args); res != nil {
		return res, nil
	}
	if args.Path == "" {
		args.Path = "."
	}
	f, done, err := callFiles(call)
	if err != nil {
		return nil, err
	}
	defer done()
	l, err := f.List(ctx, args.Path, t.Max)
	if err != nil {
		return fileError(err)
	}
	return &Result{Output: &ListFilesOutput{Path: l.Path, Entries: l.Entries, Total: l.Total, Truncated: l.Truncated}}, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
