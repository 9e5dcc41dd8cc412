package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// Builtins returns the built-in tools of API.md implemented here, with their
// default settings: shell, read_file, write_file, edit_file, list_files,
// http_request, sqlite_query and browser.
func Builtins() []Tool {
	return []Tool{&Shell{}, &ReadFile{}, &WriteFile{}, &EditFile{}, &ListFiles{}, &HTTPRequest{}, &SQLiteQuery{}, &Browser{}}
}

// decodeArguments validates call.Arguments against t's schema and decodes
// them into v (numbers as json.Number, so integers written as 5.0 survive).
// A problem is returned as the Result the model sees.
func decodeArguments(t Tool, call *Call, v any) *Result {
	args := call.Arguments
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	if err := ValidateArguments(t.Parameters(), args); err != nil {
		return &Result{Error: err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return &Result{Error: "arguments: " + err.Error()}
	}
	return nil
}

// intArgument converts an integer argument that the schema has already
// checked. JSON Schema counts 5.0 and 5e2 as integers, which strconv does
// not, hence the exact big.Float fallback.
func intArgument(field string, n json.Number) (int64, error) {
	if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return i, nil
	}
	f, _, err := big.ParseFloat(n.String(), 10, 0, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return 0, &FieldError{Field: docArguments + "." + field, Pointer: "/" + field, Message: "must be an integer, got " + n.String()}
	}
	i, acc := f.Int64()
	if acc != big.Exact {
		return 0, &FieldError{Field: docArguments + "." + field, Pointer: "/" + field, Message: "is out of range"}
	}
	return i, nil
}

// callFiles returns the call's Files, or else its Workspace opened; call
// done when the call is over.
func callFiles(call *Call) (f Files, done func(), err error) {
	if call.Files != nil {
		return call.Files, func() {}, nil
	}
	d, err := openWorkspace(call)
	if err != nil {
		return nil, nil, err
	}
	return dirFiles{d}, func() { d.Close() }, nil
}

// dirFiles are the Files of a workspace directory opened here. Its
// WriteFile checks no quota: the tools ask the call's Exec first.
type dirFiles struct{ d *workspace.Dir }

func (f dirFiles) ReadFile(_ context.Context, rel string, offset, limit int64) (*workspace.ReadResult, error) {
	return f.d.ReadFile(rel, offset, limit)
}

func (f dirFiles) WriteFile(_ context.Context, rel string, data []byte) error {
	return f.d.WriteFile(rel, data)
}

func (f dirFiles) List(_ context.Context, rel string, max int) (*workspace.Listing, error) {
	return f.d.List(rel, max)
}

// openWorkspace opens the call's workspace. Failing to is the engine's
// problem (the workspace should exist), so it is a Go error, not a Result.
func openWorkspace(call *Call) (*workspace.Dir, error) {
	if call.Workspace == "" {
		return nil, errors.New("open workspace: call has no workspace")
	}
	d, err := workspace.Open(call.Workspace)
	if err != nil {
		return nil, fmt.Errorf("open workspace of session %s: %w", call.SessionID, err)
	}
	return d, nil
}
