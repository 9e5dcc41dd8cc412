package export

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// Format names the file format in the header; Version is the newest
// version of it this package reads and the one it writes.
const (
	Format  = "longhaul.session-export"
	Version = 1
)

// MaxLineBytes bounds one line of an export file (a blob's base64 is the
// longest): a longer line is refused rather than read into memory.
const MaxLineBytes = 256 << 20

// ErrInvalid is matched (errors.Is) by every error about the content of an
// export file: damaged, truncated, of another format, or inconsistent.
var ErrInvalid = errors.New("invalid export file")

// Line kinds.
const (
	kindHeader  = "header"
	kindSession = "session"
	kindEvent   = "event"
	kindDoc     = "doc"
	kindBlob    = "blob"
	kindEnd     = "end"
)

// docKinds are the projection tables a session's docs come from, in the
// order they are written.
var docKinds = []store.DocKind{store.DocTurn, store.DocAction, store.DocEffect, store.DocArtifact, store.DocCheckpoint}

// headerLine opens the file.
type headerLine struct {
	Kind       string    `json:"kind"`
	Format     string    `json:"format"`
	Version    int       `json:"version"`
	ExportedAt time.Time `json:"exported_at"`
	// SessionID is the session that was exported; Sessions lists it and
	// its sub-agents, in the order their lines follow.
	SessionID string   `json:"session_id"`
	Sessions  []string `json:"sessions"`
}

// WebhookState is a session's webhook state in its source store: the
// secret its webhook_url notifications are signed with (handed to the
// application once), and how far the source turned events into
// notifications.
type WebhookState struct {
	Secret     string     `json:"secret"`
	Cursor     int64      `json:"cursor"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
}

// sessionLine is a session row; Spec and State travel as raw fields.
type sessionLine struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Project is absent from files written before projects existed: such
	// a session is imported into the default project.
	Project      string        `json:"project,omitempty"`
	AgentName    string        `json:"agent_name"`
	AgentVersion int           `json:"agent_version"`
	ParentID     string        `json:"parent_id,omitempty"`
	Status       string        `json:"status"`
	LastSeq      int64         `json:"last_seq"`
	Runnable     bool          `json:"runnable"`
	WakeAt       *time.Time    `json:"wake_at,omitempty"`
	CreatedAt    time.Time     `json:"created_at"`
	UpdatedAt    time.Time     `json:"updated_at"`
	Webhook      *WebhookState `json:"webhook,omitempty"`
}

// eventLine is a stored event; Data travels as a raw field.
type eventLine struct {
	Kind      string    `json:"kind"`
	SessionID string    `json:"session_id"`
	Seq       int64     `json:"seq"`
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	TurnID    string    `json:"turn_id,omitempty"`
	Step      int       `json:"step,omitempty"`
	WorkerID  string    `json:"worker_id,omitempty"`
}

// docLine is a projection row; Doc travels as a raw field.
type docLine struct {
	Kind      string    `json:"kind"`
	DocKind   string    `json:"doc_kind"`
	SessionID string    `json:"session_id"`
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

// blobLine is one blob (Content is base64 in JSON).
type blobLine struct {
	Kind    string `json:"kind"`
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	Content []byte `json:"content"`
}

// Counts says how many of each line a file holds.
type Counts struct {
	Sessions int `json:"sessions"`
	Events   int `json:"events"`
	Docs     int `json:"docs"`
	Blobs    int `json:"blobs"`
}

// endLine closes the file.
type endLine struct {
	Kind   string `json:"kind"`
	Counts Counts `json:"counts"`
}

// anyLine decodes any line: the union of the fields above. A raw field
// comes either verbatim (Spec, State, Data, Doc) or as base64 (the
// *Base64 fields).
type anyLine struct {
	Kind string `json:"kind"`

	Format     string    `json:"format"`
	Version    int       `json:"version"`
	ExportedAt time.Time `json:"exported_at"`
	Sessions   []string  `json:"sessions"`

	ID           string        `json:"id"`
	SessionID    string        `json:"session_id"`
	Project      string        `json:"project"`
	AgentName    string        `json:"agent_name"`
	AgentVersion int           `json:"agent_version"`
	ParentID     string        `json:"parent_id"`
	Status       string        `json:"status"`
	LastSeq      int64         `json:"last_seq"`
	Runnable     bool          `json:"runnable"`
	WakeAt       *time.Time    `json:"wake_at"`
	CreatedAt    time.Time     `json:"created_at"`
	UpdatedAt    time.Time     `json:"updated_at"`
	Webhook      *WebhookState `json:"webhook"`
	Spec         raw           `json:"spec"`
	SpecBase64   []byte        `json:"spec_base64"`
	State        raw           `json:"state"`
	StateBase64  []byte        `json:"state_base64"`

	Seq        int64     `json:"seq"`
	Type       string    `json:"type"`
	Time       time.Time `json:"time"`
	TurnID     string    `json:"turn_id"`
	Step       int       `json:"step"`
	WorkerID   string    `json:"worker_id"`
	Data       raw       `json:"data"`
	DataBase64 []byte    `json:"data_base64"`

	DocKind   string `json:"doc_kind"`
	Doc       raw    `json:"doc"`
	DocBase64 []byte `json:"doc_base64"`

	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	Content []byte `json:"content"`

	Counts *Counts `json:"counts"`
}

// raw is a JSON value kept as its exact bytes. Unlike json.RawMessage it
// tells an absent field (nil) from a JSON null (the four bytes).
type raw []byte

func (r *raw) UnmarshalJSON(b []byte) error {
	*r = append(raw{}, b...)
	return nil
}

// rawField is a JSON document written beside a line's other fields.
type rawField struct {
	name  string
	value []byte
}

// pick returns a raw field as it was stored: verbatim, from base64, or nil
// when the line has neither.
func pick(name string, verbatim raw, b64 []byte) ([]byte, error) {
	switch {
	case verbatim != nil && b64 != nil:
		return nil, fmt.Errorf("both %s and %s_base64 are set", name, name)
	case b64 != nil:
		if !json.Valid(b64) {
			return nil, fmt.Errorf("%s_base64 does not hold a JSON document", name)
		}
		return b64, nil
	case verbatim != nil:
		return []byte(verbatim), nil
	}
	return nil, nil
}

// encodeLine marshals v (a struct whose JSON form is a non-empty object)
// and appends the raw fields to it. A document is embedded verbatim when
// it is valid JSON, UTF-8 and free of line breaks, so the file stays one
// value per line and the bytes read back are the bytes written (encoding/json
// would compact a json.RawMessage); otherwise it goes as base64. A nil
// value is left out (it was NULL in the store).
func encodeLine(v any, raws ...rawField) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("encode line: %T is not a JSON object", v)
	}
	b = b[:len(b)-1]
	for _, f := range raws {
		if f.value == nil {
			continue
		}
		if embeddable(f.value) {
			b = append(b, `,"`+f.name+`":`...)
			b = append(b, f.value...)
			continue
		}
		b = append(b, `,"`+f.name+`_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, f.value)
		b = append(b, '"')
	}
	return append(b, '}', '\n'), nil
}

func embeddable(v []byte) bool {
	return len(v) > 0 && !bytes.ContainsAny(v, "\r\n") && utf8.Valid(v) && json.Valid(v)
}

// lineReader reads the lines of a file, knowing where each starts.
type lineReader struct {
	r   *bufio.Reader
	off int64 // offset of the next line
	n   int   // number of the last line read, from 1
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 1<<20)}
}

// next returns the next line without its newline, and its offset and
// length in the file (newline included). At the end of the file it returns
// io.EOF; a last line without a newline is returned as a line.
func (lr *lineReader) next() (line []byte, off, length int64, err error) {
	off = lr.off
	var buf []byte
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxLineBytes {
			return nil, off, 0, fmt.Errorf("%w: line %d is longer than %d bytes", ErrInvalid, lr.n+1, MaxLineBytes)
		}
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(buf) == 0 {
				return nil, off, 0, io.EOF
			}
		} else if err != nil {
			return nil, off, 0, fmt.Errorf("read line %d: %w", lr.n+1, err)
		}
		break
	}
	lr.n++
	lr.off += int64(len(buf))
	return bytes.TrimSuffix(buf, []byte("\n")), off, int64(len(buf)), nil
}
