package link

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/coder/websocket"
)

// Message types (see the package documentation).
const (
	TypeCall   = "call"
	TypeCancel = "cancel"
	TypeOutput = "output"
	TypeResult = "result"
	TypeError  = "error"
)

// Output streams.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// MaxMethodBytes bounds a method's name.
const MaxMethodBytes = 64

// Message is one frame of the protocol. Only the fields of its Type may be
// set (see the package documentation).
type Message struct {
	Type   string          `json:"type"`
	ID     uint64          `json:"id"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Stream string          `json:"stream,omitempty"`
	Data   []byte          `json:"data,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RemoteError    `json:"error,omitempty"`
}

// RemoteError is a call's failure as the callee reported it.
type RemoteError struct {
	// Code is a short machine-readable reason: CodeUnknownMethod,
	// CodeBusy, CodeBadParams, CodeFailed, CodeCancelled.
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes of a RemoteError.
const (
	CodeUnknownMethod = "unknown_method"
	CodeBusy          = "busy"
	CodeBadParams     = "bad_params"
	CodeFailed        = "failed"
	CodeCancelled     = "cancelled"
)

func (e *RemoteError) Error() string {
	return fmt.Sprintf("runner call failed (%s): %s", e.Code, e.Message)
}

// Errorf returns a *RemoteError a handler returns to fail its call with
// code.
func Errorf(code, format string, args ...any) *RemoteError {
	return &RemoteError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// check reports why m is not a well-formed message of its type: only the
// fields its type uses may be set.
func (m *Message) check() error {
	if m.ID == 0 {
		return errors.New("id: must be positive")
	}
	extra := func(names ...string) error {
		set := map[string]bool{
			"method": m.Method != "", "params": len(m.Params) > 0, "stream": m.Stream != "",
			"data": len(m.Data) > 0, "result": len(m.Result) > 0, "error": m.Error != nil,
		}
		for _, n := range names {
			delete(set, n)
		}
		for n, isSet := range set {
			if isSet {
				return fmt.Errorf("%s: not allowed in a %s message", n, m.Type)
			}
		}
		return nil
	}
	switch m.Type {
	case TypeCall:
		if m.Method == "" || len(m.Method) > MaxMethodBytes {
			return fmt.Errorf("method: must be 1 to %d bytes", MaxMethodBytes)
		}
		return extra("method", "params")
	case TypeCancel:
		return extra()
	case TypeOutput:
		if m.Stream != StreamStdout && m.Stream != StreamStderr {
			return fmt.Errorf("stream: %q is neither %s nor %s", truncate(m.Stream), StreamStdout, StreamStderr)
		}
		return extra("stream", "data")
	case TypeResult:
		return extra("result")
	case TypeError:
		if m.Error == nil {
			return errors.New("error: is required in an error message")
		}
		return extra("error")
	default:
		return fmt.Errorf("type: unknown message type %q", truncate(m.Type))
	}
}

// truncate shortens what a peer sent before an error quotes it.
func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// decodeStrict decodes data into v, refusing unknown fields and trailing
// data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// ReadJSON reads one text frame and decodes it strictly into v (the
// handshake, before New).
func ReadJSON(ctx context.Context, ws *websocket.Conn, v any) error {
	typ, data, err := ws.Read(ctx)
	if err != nil {
		return err
	}
	if typ != websocket.MessageText {
		return errors.New("a binary frame where a JSON text frame was expected")
	}
	return decodeStrict(data, v)
}

// WriteJSON writes v as one text frame (the handshake, before New).
func WriteJSON(ctx context.Context, ws *websocket.Conn, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ws.Write(ctx, websocket.MessageText, data)
}

// Hello is the runner's first frame: who it is. It carries no secret
// (the key went in the upgrade request's Authorization header) and
// nothing of a session: which sessions a runner serves is the server's
// decision alone.
type Hello struct {
	// Name is the runner's name within its key's project (NamePattern).
	Name string `json:"name"`
	// Labels are what an agent's environment.runner.labels match
	// (NamePattern each, at most MaxLabels).
	Labels []string `json:"labels,omitempty"`
	// Capacity is how many calls the runner runs at once (1 to
	// MaxCapacity).
	Capacity int `json:"capacity"`
	// Version is the runner's build (printable, at most 64 bytes).
	Version string `json:"version"`
	// Protocol is the version of this protocol the runner speaks
	// (ProtocolVersion of its build; 0 or absent: a runner from before
	// versions, protocol 1). The server refuses one below the oldest it
	// needs (StatusOutdated): what it calls of a runner is the methods of
	// its own protocol, and an older runner would not know the newer ones.
	Protocol int `json:"protocol,omitempty"`
}

// Protocol versions. Each adds methods, fields or meanings a runner must
// know; a runner answers the calls of every version up to its own.
//
//   - 1: the first (every runner from before versions, which sent none).
//   - 2: fs.stat_direct, fs.check_write, fs.write's direct (a person's
//     write that follows no symlink), env.claim (the server names an
//     environment it opened, so the runner can close one whose open's
//     answer was lost), and the unmeasurable code (a workspace it could
//     not measure, before: disk_quota). A runner of protocol 1 refuses them
//     (unknown_method, bad_params) only once a call needs them,
//     mid-session: refused at the connection instead, it is told at once
//     to upgrade.
//   - 3: fs.write's and fs.remove's if_basis and marker (a person's change
//     compared with what the person saw and made under one lock of the
//     runner, answered by an FSChangeResult). A runner of protocol 2 would
//     refuse the fields (bad_params) only when a person's change is
//     applied, and the server has no safe way to do without them: it
//     would compare and write in two calls, between which a program of
//     the environment may write the file and see it overwritten. Runners
//     ship with the server's binary, so protocol 2 is refused at the
//     connection.
//   - 4: the server says its own version in the Welcome (Protocol), and
//     takes env.abandoned (runner → server): the runner reports an
//     environment it closed because the server never claimed it, so
//     that the server wakes a session waiting for the slot it freed. A
//     runner of 4 reports only to a server that says 4 or more; to an
//     older one (which says nothing) it degrades: it closes such opens as
//     before, logging that it cannot report them and naming both
//     versions. A server of 4 takes runners of 3, which never report.
const (
	// ProtocolVersion is the version this build speaks.
	ProtocolVersion = 4
	// MinProtocolVersion is the oldest version a server of this build
	// takes: it calls the methods of protocol 3 of every runner.
	MinProtocolVersion = 3
	// MaxProtocolVersion bounds what a Hello may claim (a newer runner's
	// version is taken as it says: it answers every older call).
	MaxProtocolVersion = 1 << 20
)

// EffectiveProtocol is the version h says the runner speaks: 1 when it
// says none (a runner from before versions).
func (h *Hello) EffectiveProtocol() int {
	return max(h.Protocol, 1)
}

// Welcome is the server's answer to a Hello it accepted.
type Welcome struct {
	// ConnectionID names this connection (in the server's log and its
	// runners table).
	ConnectionID string `json:"connection_id"`
	// Node is the id of the server node that holds the connection.
	Node string `json:"node"`
	// Protocol is the runner protocol the server speaks (its build's
	// ProtocolVersion; absent from a server of protocol 3 or older).
	Protocol int `json:"protocol,omitempty"`
}

// ServerProtocol says the server's version as a runner's message names
// it: "3 or older (it does not say)" for a Welcome without one.
func (w *Welcome) ServerProtocol() string {
	if w.Protocol <= 0 {
		return "3 or older (it does not say)"
	}
	return fmt.Sprint(w.Protocol)
}

// Bounds of a Hello.
const (
	MaxLabels       = 32
	MaxCapacity     = 1024
	MaxVersionBytes = 64
	maxNameBytes    = 63
)

// CheckName reports why s is not a runner name or label: 1 to 63 bytes of
// lower-case letters, digits, '.', '_' and '-', starting with a letter or
// a digit.
func CheckName(field, s string) error {
	if s == "" || len(s) > maxNameBytes {
		return fmt.Errorf("%s: must be 1 to %d characters, got %d", field, maxNameBytes, len(s))
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || i > 0 && (r == '.' || r == '_' || r == '-')
		if !ok {
			return fmt.Errorf("%s: %q may hold only a-z, 0-9 and (not first) '.', '_', '-'", field, truncate(s))
		}
	}
	return nil
}

// Check reports the first field of h that is not valid, naming it.
func (h *Hello) Check() error {
	if err := CheckName("hello.name", h.Name); err != nil {
		return err
	}
	if len(h.Labels) > MaxLabels {
		return fmt.Errorf("hello.labels: at most %d, got %d", MaxLabels, len(h.Labels))
	}
	seen := map[string]bool{}
	for i, l := range h.Labels {
		if err := CheckName(fmt.Sprintf("hello.labels[%d]", i), l); err != nil {
			return err
		}
		if seen[l] {
			return fmt.Errorf("hello.labels[%d]: %q is given twice", i, l)
		}
		seen[l] = true
	}
	if h.Capacity < 1 || h.Capacity > MaxCapacity {
		return fmt.Errorf("hello.capacity: must be 1 to %d, got %d", MaxCapacity, h.Capacity)
	}
	if len(h.Version) > MaxVersionBytes {
		return fmt.Errorf("hello.version: at most %d bytes", MaxVersionBytes)
	}
	for _, r := range h.Version {
		if r < 0x21 || r > 0x7e {
			return errors.New("hello.version: printable ASCII only, no spaces")
		}
	}
	if h.Protocol < 0 || h.Protocol > MaxProtocolVersion {
		return fmt.Errorf("hello.protocol: must be 1 to %d (or absent), got %d", MaxProtocolVersion, h.Protocol)
	}
	return nil
}

// Close codes of a runner connection beyond the standard ones (4000-4999
// are the application's).
const (
	// StatusReplaced: a newer connection under the same name and key took
	// over (the runner restarted elsewhere); the runner must not come back.
	StatusReplaced websocket.StatusCode = 4001
	// StatusKeyRevoked: the runner's key was revoked or expired; the
	// runner must not reconnect with it.
	StatusKeyRevoked websocket.StatusCode = 4003
	// StatusBadHello: the Hello was refused (the reason names the field).
	StatusBadHello websocket.StatusCode = 4004
	// StatusNameHeld: another key's live connection holds the name; the
	// runner may try again later (the holder may go away).
	StatusNameHeld websocket.StatusCode = 4005
	// StatusTakenOver: another key took the name over after this
	// connection's liveness expired; the runner may try again later.
	StatusTakenOver websocket.StatusCode = 4006
	// StatusTooManyConns: the runner's key, or the node, holds the most
	// connections it may; the runner may try again later.
	StatusTooManyConns websocket.StatusCode = 4007
	// StatusOutdated: the runner speaks a protocol older than the server
	// needs (Hello.Protocol); it must be upgraded before it comes back.
	StatusOutdated websocket.StatusCode = 4008
)
