package longhaultype

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// TreeCursorPrefix starts the text form of every TreeCursor; the digit is
// the format's version.
const TreeCursorPrefix = "t1."

// TreeCursor is the resume point of a session tree's event stream
// (GET /v1/sessions/{id}/events/stream?include=subagents): the seq of the
// last event sent of each session of the tree. A session it does not name
// resumes from its first event, so a sub-agent spawned while a client was
// away is streamed from its start.
//
// Its text form, the SSE id of every frame of such a stream, is
// TreeCursorPrefix followed by the unpadded base64url encoding of a JSON
// object that maps session ids to seqs, keys sorted, sessions at seq 0 left
// out: {"ses_a":12,"ses_b":4} is "t1.eyJzZXNfYSI6MTIsInNlc19iIjo0fQ". It is
// safe in a header, a URL query and an SSE id line as it is.
type TreeCursor map[string]int64

// String returns the cursor's text form. encoding/json sorts map keys, so
// equal cursors have equal text.
func (c TreeCursor) String() string {
	m := make(map[string]int64, len(c))
	for id, seq := range c {
		if seq > 0 {
			m[id] = seq
		}
	}
	// A map of strings to integers always encodes.
	data, _ := json.Marshal(m)
	return TreeCursorPrefix + base64.RawURLEncoding.EncodeToString(data)
}

// IsTreeCursor reports whether s has the form of a TreeCursor (its prefix),
// as opposed to a plain event seq.
func IsTreeCursor(s string) bool { return strings.HasPrefix(s, TreeCursorPrefix) }

// ParseTreeCursor parses the text form of a cursor (see TreeCursor). Every
// session id must be non-empty and every seq an integer >= 0.
func ParseTreeCursor(s string) (TreeCursor, error) {
	rest, ok := strings.CutPrefix(s, TreeCursorPrefix)
	if !ok {
		return nil, fmt.Errorf("a tree cursor starts with %q", TreeCursorPrefix)
	}
	data, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, errors.New("a tree cursor's body is unpadded base64url")
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("a tree cursor's body is a JSON object of session ids to seqs")
	}
	var m map[string]int64
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, errors.New("a tree cursor's body is a JSON object of session ids to seqs")
	}
	c := make(TreeCursor, len(m))
	for id, seq := range m {
		if id == "" {
			return nil, errors.New("a tree cursor names a session with an empty id")
		}
		if seq < 0 {
			return nil, fmt.Errorf("a tree cursor gives session %q a negative seq (%d)", id, seq)
		}
		if seq > 0 {
			c[id] = seq
		}
	}
	return c, nil
}
