package scripted

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strconv"

	"github.com/longhaul-dev/longhaul/internal/model"
)

// The helpers below decode one JSON value each and name the value's path in
// every error. They are fed values that encoding/json already split out of a
// valid document, so the only failures left are wrong kinds and bad values.

func fieldErr(path, msg string) *model.FieldError {
	return &model.FieldError{Field: path, Message: msg}
}

// simpleKey matches keys that read unambiguously after a dot in a path.
var simpleKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// member is the path of key inside the object at path.
func member(path, key string) string {
	if simpleKey.MatchString(key) {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// kind is the first byte of a JSON value: '{', '[', '"', 't', 'f', 'n', '-'
// or a digit; 0 for an empty value.
func kind(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func isNumber(raw json.RawMessage) bool {
	k := kind(raw)
	return k == '-' || (k >= '0' && k <= '9')
}

// object decodes an object whose keys must all be in known.
func object(raw json.RawMessage, path string, known ...string) (map[string]json.RawMessage, error) {
	if kind(raw) != '{' {
		return nil, fieldErr(path, "must be an object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fieldErr(path, "must be a valid JSON object")
	}
	var unknown []string
	for k := range fields {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		// Sorted, so the same script always gets the same error.
		slices.Sort(unknown)
		return nil, fieldErr(member(path, unknown[0]), "unknown field")
	}
	return fields, nil
}

func array(raw json.RawMessage, path, msg string) ([]json.RawMessage, error) {
	if kind(raw) != '[' {
		return nil, fieldErr(path, msg)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fieldErr(path, msg)
	}
	return items, nil
}

func str(raw json.RawMessage, path string) (string, error) {
	if kind(raw) != '"' {
		return "", fieldErr(path, "must be a string")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fieldErr(path, "must be a string")
	}
	return s, nil
}

// integer decodes a whole number in [lo, hi]; rangeMsg is the error for a
// number outside. A whole number written with a fraction or an exponent (1.0,
// 1e3) is accepted: JSON does not distinguish them. The bounds used in this
// package are below 2^53, so the float64 detour is exact for any value it
// accepts.
func integer(raw json.RawMessage, path string, lo, hi int64, rangeMsg string) (int64, error) {
	if !isNumber(raw) {
		return 0, fieldErr(path, "must be an integer")
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil {
		// Only a magnitude beyond float64 gets here.
		return 0, fieldErr(path, rangeMsg)
	}
	if f != math.Trunc(f) {
		return 0, fieldErr(path, "must be an integer")
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, fieldErr(path, rangeMsg)
	}
	return int64(f), nil
}

// number decodes a number in [lo, hi]; rangeMsg is the error for a number
// outside.
func number(raw json.RawMessage, path string, lo, hi float64, rangeMsg string) (float64, error) {
	if !isNumber(raw) {
		return 0, fieldErr(path, "must be a number")
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil || f < lo || f > hi {
		return 0, fieldErr(path, rangeMsg)
	}
	if f == 0 {
		f = 0 // -0 reads back as 0, so a re-encoded script does not say "-0"
	}
	return f, nil
}
