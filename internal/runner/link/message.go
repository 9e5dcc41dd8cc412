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
