package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// JSON returns raw with every secret replaced, still valid JSON when raw is.
// Secrets are replaced inside the document's decoded strings (keys included)
// and numbers: a number that holds a secret becomes a string. A document
// that needs no change is returned as it is (the same slice); one that does
// is re-encoded compactly. raw that is not valid JSON is redacted as bytes
// (it cannot become valid).
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if r.Empty() || len(raw) < MinLength {
		return raw
	}
	// A document with no secret in its bytes needs no change unless a string
	// hides one behind escapes the bytes do not show (\u0041, \/).
	if find(r, raw) == nil && !bytes.Contains(raw, []byte(`\u`)) && !bytes.Contains(raw, []byte(`\/`)) {
		return raw
	}
	out, changed, err := r.rewriteJSON(raw)
	if err != nil {
		return r.Bytes(raw)
	}
	if !changed {
		return raw
	}
	return out
}

// rewriteJSON re-encodes raw token by token, redacting strings and numbers.
func (r *Redactor) rewriteJSON(raw []byte) (out []byte, changed bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	// stack holds, per open container, whether it is an object and how
	// many tokens (keys and values) it has had.
	type frame struct {
		object bool
		n      int
	}
	var stack []frame
	buf := make([]byte, 0, len(raw)+64)
	separate := func() {
		if len(stack) == 0 {
			return
		}
		f := &stack[len(stack)-1]
		switch {
		case f.object && f.n%2 == 1:
			buf = append(buf, ':')
		case f.n > 0:
			buf = append(buf, ',')
		}
		f.n++
	}
	appendString := func(s string) error {
		enc, err := json.Marshal(s)
		if err != nil {
			return err
		}
		buf = append(buf, enc...)
		return nil
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				separate()
				stack = append(stack, frame{object: v == '{'})
			default:
				if len(stack) == 0 {
					return nil, false, errors.New("unbalanced JSON")
				}
				stack = stack[:len(stack)-1]
			}
			buf = append(buf, byte(v))
		case string:
			separate()
			red := r.String(v)
			if red != v {
				changed = true
			}
			if err := appendString(red); err != nil {
				return nil, false, err
			}
		case json.Number:
			separate()
			if red := r.String(string(v)); red != string(v) {
				changed = true
				if err := appendString(red); err != nil {
					return nil, false, err
				}
			} else {
				buf = append(buf, v...)
			}
		case bool:
			separate()
			if v {
				buf = append(buf, "true"...)
			} else {
				buf = append(buf, "false"...)
			}
		case nil:
			separate()
			buf = append(buf, "null"...)
		}
		if len(stack) == 0 && dec.More() {
			// A second top-level value: raw is not one JSON document.
			return nil, false, errors.New("data after the JSON value")
		}
	}
	if len(stack) != 0 || len(buf) == 0 {
		return nil, false, errors.New("incomplete JSON")
	}
	return buf, changed, nil
}
