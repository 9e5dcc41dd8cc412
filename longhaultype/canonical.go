package longhaultype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// The canonical form of a JSON document, here rather than in the server's
// code because the Go client needs it too (SameAgentSpec: Client.EnsureAgent
// compares specs exactly as the server does), and this package is the one
// both may import.

// maxCanonicalDepth bounds nesting so a hostile document cannot exhaust the
// stack.
const maxCanonicalDepth = 1000

// CanonicalJSON returns the canonical encoding of the JSON document v: object
// keys sorted (by their UTF-8 bytes), no insignificant whitespace, strings
// re-encoded without HTML escaping, and numbers exactly as written (1.0 and 1
// stay different: the hash of a tool call's arguments binds what the model
// produced, and a tool may care). Two documents that differ only in key
// order or whitespace have the same canonical form. It is the form an
// approval's arguments hash is computed over, and the form in which
// SameAgentSpec compares two agent specs.
//
// Objects with a duplicate key are refused: different JSON parsers keep
// different duplicates, so an approval bound to one reading could execute
// another. Empty input and trailing data are refused too.
func CanonicalJSON(v json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := canonicalValue(dec, &buf, 0); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("canonical json: unexpected data after the top-level value")
	}
	return buf.Bytes(), nil
}

func canonicalValue(dec *json.Decoder, buf *bytes.Buffer, depth int) error {
	if depth > maxCanonicalDepth {
		return fmt.Errorf("nested deeper than %d levels", maxCanonicalDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return canonicalObject(dec, buf, depth)
		case '[':
			return canonicalArray(dec, buf, depth)
		default:
			return fmt.Errorf("unexpected %q", rune(t))
		}
	case string:
		return writeString(buf, t)
	case json.Number:
		buf.WriteString(t.String())
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case nil:
		buf.WriteString("null")
	default:
		return fmt.Errorf("unexpected token %v", tok)
	}
	return nil
}

func canonicalObject(dec *json.Decoder, buf *bytes.Buffer, depth int) error {
	type member struct {
		key   string
		value []byte
	}
	var members []member
	seen := make(map[string]struct{})
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key is %v, not a string", tok)
		}
		if _, dup := seen[key]; dup {
			return fmt.Errorf("duplicate object key %q", key)
		}
		seen[key] = struct{}{}
		var vb bytes.Buffer
		if err := canonicalValue(dec, &vb, depth+1); err != nil {
			return err
		}
		members = append(members, member{key: key, value: vb.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return err
	}
	slices.SortFunc(members, func(a, b member) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	buf.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeString(buf, m.key); err != nil {
			return err
		}
		buf.WriteByte(':')
		buf.Write(m.value)
	}
	buf.WriteByte('}')
	return nil
}

func canonicalArray(dec *json.Decoder, buf *bytes.Buffer, depth int) error {
	buf.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := canonicalValue(dec, buf, depth+1); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return err
	}
	buf.WriteByte(']')
	return nil
}

// writeString writes s as a JSON string. HTML characters are not escaped, so
// the canonical form reads like the input.
func writeString(buf *bytes.Buffer, s string) error {
	if plainASCII(s) {
		// What the encoder below writes for it, without the encoder.
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return nil
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode appends a newline
	return nil
}

// SameAgentSpec reports whether two agent specs are the same definition:
// equal as canonical JSON, so the key order and spacing of their raw JSON
// parts (a script, a schema) do not count, and a spec that went through a
// store and back equals the file it came from. It is the rule by which
// EnsureAgent (of the API, the library and the Go client) decides whether
// a spec is a new version.
func SameAgentSpec(a, b *AgentSpec) (bool, error) {
	ca, err := canonicalSpec(a)
	if err != nil {
		return false, err
	}
	cb, err := canonicalSpec(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

func canonicalSpec(s *AgentSpec) ([]byte, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode agent spec: %w", err)
	}
	return CanonicalJSON(raw)
}

// plainASCII reports whether s is printable ASCII with no '"' or '\\': a
// string the JSON encoder (HTML escaping off) writes between quotes as it is.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
