package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// MaxEditBytes is the largest file edit_file works on; it holds the whole
// file in memory.
const MaxEditBytes = 8 << 20

var editFileSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File path relative to the workspace."},
    "old": {"type": "string", "minLength": 1, "description": "Exact text to replace; it must occur exactly once in the file."},
    "new": {"type": "string", "description": "Replacement text."}
  },
  "required": ["path", "old", "new"],
  "additionalProperties": false
}`)

// EditFile is the edit_file built-in: replace the one occurrence of old with
// new. The zero value is ready to use.
//
// It is declared idempotent, and the engine re-runs an idempotent call whose
// outcome a crash left unknown. A plain "old must occur once" rule would fail
// that re-run, since old is gone after the first run (or, if new contains
// old, would apply the edit a second time). So the edit counts as already
// applied, and succeeds without writing, when new occurs exactly once and
// every occurrence of old lies inside it; the re-run then returns the same
// output as the first run. The price is that a file which already looked
// edited before the first run is left alone, which is the state asked for
// anyway. A deletion (new is empty) leaves nothing to recognise, so its
// re-run reports that old occurs 0 times; the file is still right.
type EditFile struct{}

// EditFileOutput is the output of edit_file.
type EditFileOutput struct {
	Path string `json:"path"`
	// SHA256 is the hex digest of the file's content after the edit.
	SHA256 string `json:"sha256"`
}

// Name implements Tool.
func (*EditFile) Name() string { return "edit_file" }

// Description implements Tool.
func (*EditFile) Description() string {
	return "Replace an exact piece of text in a workspace file. `old` must occur exactly once; " +
		"include enough surrounding text to make it unique."
}

// Parameters implements Tool.
func (*EditFile) Parameters() json.RawMessage { return clone(editFileSchema) }

// Effect implements Tool.
func (*EditFile) Effect() lt.EffectClass { return lt.EffectIdempotent }

// Run implements Tool.
func (t *EditFile) Run(ctx context.Context, call *Call) (*Result, error) {
	var args struct {
		Path string `json:"path"`
		Old  string `json:"old"`
		New  string `json:"new"`
	}
	if res := decodeArguments(t, call, &args); res != nil {
		return res, nil
	}
	f, done, err := callFiles(call)
	if err != nil {
		return nil, err
	}
	defer done()
	r, err := f.ReadFile(ctx, args.Path, 0, MaxEditBytes)
	if err != nil {
		return fileError(err)
	}
	if r.Truncated {
		return &Result{Error: fmt.Sprintf("edit %q: file is larger than %d bytes, the most edit_file handles; use shell or write_file", args.Path, MaxEditBytes)}, nil
	}
	content := string(r.Data)
	out := &EditFileOutput{Path: r.Path}

	nOld := occurrences(content, args.Old)
	if args.New != "" && occurrences(content, args.New) == 1 && nOld == occurrences(args.New, args.Old) {
		out.SHA256 = sha256Hex(r.Data)
		return &Result{Output: out}, nil
	}
	switch nOld {
	case 0:
		return &Result{Error: fmt.Sprintf("edit %q: old text occurs 0 times; it must occur exactly once (read the file to copy the exact text)", args.Path)}, nil
	case 1:
	default:
		return &Result{Error: fmt.Sprintf("edit %q: old text occurs %d times; it must occur exactly once (include more surrounding text to make it unique)", args.Path, nOld)}, nil
	}
	edited := []byte(strings.Replace(content, args.Old, args.New, 1))
	if err := checkDiskQuota(call, int64(len(edited))); err != nil {
		return &Result{Error: fmt.Sprintf("edit %q: %v", args.Path, err)}, nil
	}
	if err := f.WriteFile(ctx, args.Path, edited); err != nil {
		return fileError(err)
	}
	out.SHA256 = sha256Hex(edited)
	return &Result{Output: out}, nil
}

// occurrences counts the occurrences of sub in s, overlapping ones included:
// in "aaa", "aa" occurs twice, and replacing "the" one occurrence would be a
// guess.
func occurrences(s, sub string) int {
	n := 0
	for i := 0; ; {
		j := strings.Index(s[i:], sub)
		if j < 0 {
			return n
		}
		n++
		i += j + 1
		if i > len(s) {
			return n
		}
	}
}
