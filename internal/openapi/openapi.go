package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"go.yaml.in/yaml/v3"
)

// source is the document as written: YAML, for the people who keep it.
//
//go:embed openapi.yaml
var source []byte

// YAML returns the document as written.
func YAML() []byte { return bytes.Clone(source) }

// JSON returns the document as indented JSON (what GET /v1/openapi.json
// serves). The embedded YAML is checked by the package's tests, so a
// document that does not convert is a build mistake: JSON panics on it.
func JSON() []byte { return bytes.Clone(encoded()) }

var encoded = sync.OnceValue(func() []byte {
	b, err := toJSON(source)
	if err != nil {
		panic(fmt.Sprintf("openapi: embedded document: %v", err))
	}
	return b
})

// toJSON converts a YAML document to indented JSON. Object keys come out
// sorted (encoding/json sorts map keys), which every reader accepts.
func toJSON(y []byte) ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(y, &doc); err != nil {
		return nil, fmt.Errorf("decode YAML: %w", err)
	}
	doc, err := jsonValue(doc, "")
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode JSON: %w", err)
	}
	return append(b, '\n'), nil
}

// jsonValue checks that v, decoded from YAML, has a JSON form: a mapping
// with a key that is not a string (an unquoted 200 is an integer in YAML)
// would not encode, so it is named instead.
func jsonValue(v any, at string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			ev, err := jsonValue(e, at+"/"+k)
			if err != nil {
				return nil, err
			}
			v[k] = ev
		}
		return v, nil
	case map[any]any:
		for k := range v {
			if _, ok := k.(string); !ok {
				return nil, fmt.Errorf("%s: key %v is not a string (quote it)", at, k)
			}
		}
		return nil, fmt.Errorf("%s: mapping with non-string keys", at)
	case []any:
		for i, e := range v {
			ev, err := jsonValue(e, fmt.Sprintf("%s/%d", at, i))
			if err != nil {
				return nil, err
			}
			v[i] = ev
		}
		return v, nil
	default:
		return v, nil
	}
}
