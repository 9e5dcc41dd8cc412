package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lhnode "github.com/longhaul-dev/longhaul/internal/node"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// This file reads the files people write by hand: the server's config
// (longhaul.yaml: agents to register at start, users for single sign-on) and
// agent definitions for `run --agent-spec` and `agents put`. YAML or JSON,
// decoded strictly: an unknown or mistyped field is an error naming the
// file, the line (for YAML) and the field's path, such as
// "agents[0].spec.tools[1].effect".

// defaultConfigFile is read by `serve` when it exists and --config is not
// given.
const defaultConfigFile = "longhaul.yaml"

// maxConfigBytes bounds a hand-written file; anything larger is a mistake.
const maxConfigBytes = 8 << 20

// serverConfig is the content of longhaul.yaml.
type serverConfig struct {
	// Agents are registered at start, each only when its spec differs from
	// the latest stored version, so restarts do not pile up versions.
	Agents []lt.PutAgentRequest `json:"agents"`
	// ModelKeyEnv allows environment variables as a model's api_key_env,
	// each for its hosts (as serve --model-key-env NAME=HOST[,HOST]).
	ModelKeyEnv map[string][]string `json:"model_key_env,omitempty"`
	// Users are the people a trusted reverse proxy may sign in (serve
	// --trusted-proxy-header), each with a role and a project.
	Users []configUser `json:"users,omitempty"`
	// SandboxROPaths are host directories every sandbox sees read-only
	// (as serve --sandbox-ro-path; both lists are used).
	SandboxROPaths []string `json:"sandbox_ro_paths,omitempty"`
}

// configUser is one of the config file's users: the name the proxy gives
// (matched regardless of case), a role, and a project (default: every
// project for an admin, "default" for any other role).
type configUser struct {
	Name    string  `json:"name"`
	Role    lt.Role `json:"role"`
	Project string  `json:"project,omitempty"`
}

// configFile is a loaded longhaul.yaml, with what is needed to name the line
// of a field that the engine refuses later.
type configFile struct {
	doc *document
	serverConfig
}

// loadConfig reads and checks a server config file. Agent specs are checked
// for shape here; their meaning (known provider, known tools) is checked by
// the engine when serve registers them.
func loadConfig(path string) (*configFile, error) {
	cf := &configFile{}
	doc, err := decodeFile(path, &cf.serverConfig)
	if err != nil {
		return nil, err
	}
	cf.doc = doc
	// Names are unique per project: the same name in two projects is two
	// agents.
	type key struct{ project, name string }
	seen := map[key]int{}
	for i, a := range cf.Agents {
		field := fmt.Sprintf("agents[%d].name", i)
		if a.Name == "" {
			return nil, doc.errorAt(field, "required")
		}
		k := key{cmp.Or(a.Project, lt.DefaultProject), a.Name}
		if j, dup := seen[k]; dup {
			return nil, doc.errorAt(field, fmt.Sprintf("agent %q of project %s is already defined by agents[%d]", a.Name, k.project, j))
		}
		seen[k] = i
		if a.Spec.Model.Provider == "" {
			// An absent spec decodes to the zero spec; say what is missing
			// rather than letting the engine call the provider unknown.
			return nil, doc.errorAt(fmt.Sprintf("agents[%d].spec.model.provider", i), "required")
		}
	}
	if err := checkUsers(doc, cf.Users); err != nil {
		return nil, err
	}
	return cf, nil
}

// checkUsers checks the config file's users as the server will (a known
// role, a valid project, names unique regardless of case), naming the
// field and its line.
func checkUsers(doc *document, users []configUser) error {
	seen := map[string]int{}
	for i, u := range users {
		if _, err := (lhnode.ProxyUser{Name: u.Name, Role: u.Role, Project: u.Project}).Check(); err != nil {
			var ae *apierror.Error
			if errors.As(err, &ae) && ae.Field != "" {
				return doc.errorAt(fmt.Sprintf("users[%d].%s", i, ae.Field), ae.Message)
			}
			return doc.errorAt(fmt.Sprintf("users[%d]", i), err.Error())
		}
		key := strings.ToLower(u.Name)
		if j, dup := seen[key]; dup {
			return doc.errorAt(fmt.Sprintf("users[%d].name", i),
				fmt.Sprintf("user %q is already defined by users[%d] (names are compared regardless of case)", u.Name, j))
		}
		seen[key] = i
	}
	return nil
}

// fileError is a problem in a hand-written file, located as precisely as
// the format allows.
type fileError struct {
	File  string
	Line  int    // 0 when unknown (JSON files)
	Field string // dotted path; empty for a syntax error
	Msg   string
}

func (e *fileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// document is a decoded file: its name and the line of every field path
// (YAML only).
type document struct {
	name  string
	lines map[string]int
}

// errorAt returns a fileError for field, at the line of the field or of its
// nearest enclosing field.
func (d *document) errorAt(field, msg string) error {
	return &fileError{File: d.name, Line: d.lineOf(field), Field: field, Msg: msg}
}

func (d *document) lineOf(field string) int {
	for p := field; ; {
		if l, ok := d.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return d.lines[""]
		}
		p = p[:i]
	}
}

// decodeFile reads path (YAML, or JSON when it starts with '{') strictly
// into out, which must point to a struct.
func decodeFile(path string, out any) (*document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, &fileError{File: path, Msg: fmt.Sprintf("larger than %d bytes", maxConfigBytes)}
	}
	return decodeDocument(path, data, out)
}

// decodeDocument is decodeFile on bytes; name is used in errors.
func decodeDocument(name string, data []byte, out any) (*document, error) {
	doc := &document{name: name, lines: map[string]int{}}
	var v any
	var err error
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		// JSON is parsed as JSON: YAML parsers disagree with JSON on tabs
		// and a few escapes.
		v, err = parseJSON(name, trimmed)
	} else {
		v, err = parseYAML(name, data, doc.lines)
	}
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, &fileError{File: name, Msg: "the file is empty"}
	}
	t := reflect.TypeOf(out).Elem()
	if err := checkValue(v, t, ""); err != nil {
		var fe *fieldProblem
		if errors.As(err, &fe) {
			return nil, doc.errorAt(fe.path, fe.msg)
		}
		return nil, err
	}
	// The value has the shape of out; encoding/json does the rest, still
	// refusing unknown fields in case the check above missed one.
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, &fileError{File: name, Msg: err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, doc.errorAt(te.Field, fmt.Sprintf("cannot hold the %s given", te.Value))
		}
		return nil, &fileError{File: name, Msg: strings.TrimPrefix(err.Error(), "json: ")}
	}
	return doc, nil
}

func parseJSON(name string, data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, jsonSyntaxError(name, data, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &fileError{File: name, Line: lineAt(data, dec.InputOffset()), Msg: "unexpected data after the JSON value"}
	}
	return v, nil
}

func jsonSyntaxError(name string, data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &fileError{File: name, Line: lineAt(data, se.Offset), Msg: strings.TrimPrefix(se.Error(), "json: ")}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &fileError{File: name, Msg: "the JSON ends too early"}
	}
	return &fileError{File: name, Msg: err.Error()}
}

// lineAt is the 1-based line of byte offset off.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// maxYAMLNodes bounds the values produced from one file, aliases expanded,
// so that a few anchors referring to each other cannot explode in memory.
const maxYAMLNodes = 1 << 20

func parseYAML(name string, data []byte, lines map[string]int) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, &fileError{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, &fileError{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
		}
		return nil, &fileError{File: name, Line: line, Msg: "more than one YAML document; keep one"}
	}
	c := &yamlConverter{name: name, lines: lines}
	return c.value(&root, "", 0)
}

// yamlConverter turns a YAML node tree into the values encoding/json
// produces (map[string]any, []any, string, json.Number, bool, nil),
// recording the line of every path.
type yamlConverter struct {
	name  string
	lines map[string]int
	nodes int
}

func (c *yamlConverter) errorf(n *yaml.Node, path, format string, args ...any) error {
	return &fileError{File: c.name, Line: n.Line, Field: path, Msg: fmt.Sprintf(format, args...)}
}

func (c *yamlConverter) value(n *yaml.Node, path string, depth int) (any, error) {
	c.nodes++
	if c.nodes > maxYAMLNodes || depth > 1000 {
		return nil, c.errorf(n, path, "too deeply nested or too many values (aliases expanded)")
	}
	if _, seen := c.lines[path]; !seen && n.Line > 0 {
		c.lines[path] = n.Line
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0], path, depth+1)
	case yaml.AliasNode:
		return c.value(n.Alias, path, depth+1)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, vn := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return nil, c.errorf(k, path, "keys must be plain strings (merge keys and complex keys are not supported)")
			}
			p := joinField(path, k.Value)
			if _, dup := m[k.Value]; dup {
				return nil, c.errorf(k, p, "defined twice")
			}
			c.lines[p] = k.Line
			v, err := c.value(vn, p, depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, en := range n.Content {
			v, err := c.value(en, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		return c.scalar(n, path)
	default:
		return nil, c.errorf(n, path, "unsupported YAML node")
	}
}

func (c *yamlConverter) scalar(n *yaml.Node, path string) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, c.errorf(n, path, "%v", err)
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return json.Number(strconv.FormatInt(i, 10)), nil
		}
		var u uint64
		if err := n.Decode(&u); err == nil {
			return json.Number(strconv.FormatUint(u, 10)), nil
		}
		return nil, c.errorf(n, path, "integer %s is out of range", n.Value)
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, c.errorf(n, path, "%v", err)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, c.errorf(n, path, "%s is not a finite number", n.Value)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case "!!str", "!!timestamp", "!!binary":
		// A date stays the text it was written as: the API wants strings.
		return n.Value, nil
	default:
		return nil, c.errorf(n, path, "unsupported YAML tag %s", n.Tag)
	}
}

func joinField(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldProblem is a value that does not fit the type at path.
type fieldProblem struct {
	path string
	msg  string
}

func (p *fieldProblem) Error() string { return p.path + ": " + p.msg }

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// checkValue checks that v (as produced by encoding/json or yamlConverter)
// fits type t, the way encoding/json would decode it, and that every object
// key is a field of its struct. Inside a json.RawMessage anything goes: the
// server checks those (scripts, schemas, policies).
func checkValue(v any, t reflect.Type, path string) error {
	if v == nil || t == rawMessageType {
		return nil // null leaves a field unset, as in encoding/json
	}
	wrong := func(want string) error {
		return &fieldProblem{path: path, msg: fmt.Sprintf("must be %s, not %s", want, describeValue(v))}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkValue(v, t.Elem(), path)
	case reflect.Interface:
		return nil
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			ft, ok := fields[k]
			if !ok {
				return &fieldProblem{path: joinField(path, k), msg: unknownFieldMsg(k, fields)}
			}
			if err := checkValue(m[k], ft, joinField(path, k)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := checkValue(m[k], t.Elem(), joinField(path, k)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice, reflect.Array:
		s, ok := v.([]any)
		if !ok {
			return wrong("a list")
		}
		for i, e := range s {
			if err := checkValue(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		if _, ok := v.(string); !ok {
			return wrong("a string")
		}
		return nil
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrong("true or false")
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return wrong("an integer")
		}
		i, err := n.Int64()
		if err != nil || reflect.Zero(t).OverflowInt(i) {
			return &fieldProblem{path: path, msg: fmt.Sprintf("must be an integer in range, not %s", n)}
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			return wrong("a non-negative integer")
		}
		u, err := strconv.ParseUint(n.String(), 10, 64)
		if err != nil || reflect.Zero(t).OverflowUint(u) {
			return &fieldProblem{path: path, msg: fmt.Sprintf("must be a non-negative integer in range, not %s", n)}
		}
		return nil
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return wrong("a number")
		}
		return nil
	default:
		return &fieldProblem{path: path, msg: fmt.Sprintf("has unsupported type %s", t)}
	}
}

// describeValue names the kind of a decoded value for an error message.
func describeValue(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("the string %q", truncate(x, 40))
	case json.Number:
		return "the number " + x.String()
	case bool:
		return strconv.FormatBool(x)
	default:
		return fmt.Sprintf("%T", v)
	}
}

// jsonFields maps the JSON names of t's fields (as encoding/json sees them,
// embedded structs flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// unknownFieldMsg says a key is not a field, suggesting the closest one.
func unknownFieldMsg(key string, fields map[string]reflect.Type) string {
	best, bestDist := "", 3
	for name := range fields {
		if d := editDistance(strings.ToLower(key), strings.ToLower(name)); d < bestDist || d == bestDist && best != "" && name < best {
			best, bestDist = name, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown field %q (did you mean %q?)", key, best)
	}
	names := slices.Sorted(maps.Keys(fields))
	return fmt.Sprintf("unknown field %q (known fields: %s)", key, strings.Join(names, ", "))
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
