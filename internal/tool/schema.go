package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// FieldError is a problem with one field of a JSON document: a tool call's
// arguments (Field starts with "arguments") or a tool's parameter schema
// (Field starts with "parameters"). Callers add their own prefix, e.g. the
// engine reports "agent_spec.tools[2]." + Field when it refuses an agent.
type FieldError struct {
	// Field is the dotted path of the field, e.g. "arguments.timeout_seconds"
	// or "arguments.items[2].name"; just the document name when the whole
	// document is at fault.
	Field string
	// Pointer is the RFC 6901 JSON pointer of the field inside the document,
	// e.g. "/timeout_seconds"; "" for the whole document.
	Pointer string
	// Message says what is wrong, e.g. "must be <= 600".
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Document names used as the first element of FieldError.Field.
const (
	docArguments  = "arguments"
	docParameters = "parameters"
)

// schemaURL is where each schema is registered in its own compiler. It is
// never fetched; it only gives relative references a base.
const schemaURL = "mem://longhaul/parameters.json"

// maxCachedSchemas bounds the compiled-schema cache; inline agent specs can
// bring any number of distinct schemas.
const maxCachedSchemas = 1024

var schemaCache = struct {
	sync.Mutex
	m map[string]*jsonschema.Schema
}{m: make(map[string]*jsonschema.Schema)}

var printer = message.NewPrinter(language.English)

// CompileSchema checks that schema is a usable parameter schema: a JSON
// object that is a valid JSON Schema (draft 2020-12 unless it says
// otherwise), describing an object, with no reference to an outside
// document. Problems are *FieldError values naming the offending keyword,
// e.g. "parameters.properties.count.type: ...". The compiled schema is cached
// for ValidateArguments.
func CompileSchema(schema json.RawMessage) error {
	_, err := compileSchema(schema)
	return err
}

// ValidateArguments checks args (a JSON object; empty means {}) against
// schema. A problem with the arguments is a *FieldError naming the field,
// e.g. "arguments.timeout_seconds: must be <= 600"; when there are several,
// the first by field path is reported. A bad schema gives CompileSchema's
// error.
func ValidateArguments(schema json.RawMessage, args json.RawMessage) error {
	sch, err := compileSchema(schema)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return &FieldError{Field: docArguments, Message: "not valid JSON: " + err.Error()}
	}
	if _, ok := doc.(map[string]any); !ok {
		return &FieldError{Field: docArguments, Message: "must be a JSON object, got " + jsonTypeName(doc)}
	}
	err = sch.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &FieldError{Field: docArguments, Message: err.Error()}
	}
	return firstProblem(docArguments, doc, ve)
}

func compileSchema(schema json.RawMessage) (*jsonschema.Schema, error) {
	// A tool's schema is checked at every call: its bytes as given are a
	// key too, so a schema seen before costs no canonicalisation (the
	// compiled schema depends only on the canonical form of the bytes).
	schemaCache.Lock()
	sch, ok := schemaCache.m[string(schema)]
	schemaCache.Unlock()
	if ok {
		return sch, nil
	}
	canon, err := CanonicalJSON(schema)
	if err != nil {
		return nil, &FieldError{Field: docParameters, Message: "not valid JSON: " + strings.TrimPrefix(err.Error(), "canonical json: ")}
	}
	key := string(canon)
	schemaCache.Lock()
	sch, ok = schemaCache.m[key]
	schemaCache.Unlock()
	if ok {
		cacheSchema(string(schema), sch)
		return sch, nil
	}

	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(canon))
	if err != nil {
		return nil, &FieldError{Field: docParameters, Message: "not valid JSON: " + err.Error()}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, &FieldError{Field: docParameters, Message: "must be a JSON object (a JSON Schema), got " + jsonTypeName(doc)}
	}
	// Tool arguments are always an object, and providers reject parameter
	// schemas of another type; say so here rather than at the first call.
	if t, present := obj["type"]; present && t != "object" {
		return nil, &FieldError{Field: docParameters + ".type", Pointer: "/type", Message: `must be "object": tool arguments are a JSON object`}
	}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// No $ref or $schema may pull a document from the file system or the
	// network: a schema comes from an agent definition, which may be
	// written by anyone with API access.
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, &FieldError{Field: docParameters, Message: cleanSchemaMessage(err.Error())}
	}
	sch, err = c.Compile(schemaURL)
	if err != nil {
		return nil, schemaError(doc, err)
	}

	cacheSchema(key, sch)
	cacheSchema(string(schema), sch)
	return sch, nil
}

// cacheSchema keeps sch, compiled from a schema whose bytes or canonical
// form are key.
func cacheSchema(key string, sch *jsonschema.Schema) {
	schemaCache.Lock()
	defer schemaCache.Unlock()
	if _, ok := schemaCache.m[key]; ok {
		return
	}
	if len(schemaCache.m) >= maxCachedSchemas {
		// Evict an arbitrary entry: recompiling a schema costs little,
		// and the working set of a server is its agents' tools.
		for k := range schemaCache.m {
			delete(schemaCache.m, k)
			break
		}
	}
	schemaCache.m[key] = sch
}

// refusingLoader refuses every external document.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("references to other documents are not allowed (%s)", url)
}

// schemaError maps a compile error to a *FieldError in the parameters
// document.
func schemaError(doc any, err error) error {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			return firstProblem(docParameters, doc, ve)
		}
	}
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) {
		msg := "references to other documents are not allowed"
		if le.URL != "" && !strings.HasPrefix(le.URL, schemaURL) {
			msg += fmt.Sprintf(" (%s)", le.URL)
		}
		return &FieldError{Field: docParameters, Message: msg}
	}
	var re *jsonschema.InvalidRegexError
	if errors.As(err, &re) {
		ptr := fragment(re.URL)
		return &FieldError{Field: fieldName(docParameters, doc, ptr), Pointer: ptr, Message: fmt.Sprintf("invalid regular expression %q: %v", re.Regex, re.Err)}
	}
	return &FieldError{Field: docParameters, Message: cleanSchemaMessage(err.Error())}
}

// fragment returns the JSON pointer in the fragment of a schema URL.
func fragment(url string) string {
	_, frag, ok := strings.Cut(url, "#")
	if !ok {
		return ""
	}
	return frag
}

// cleanSchemaMessage removes the internal resource URL from a library
// message.
func cleanSchemaMessage(msg string) string {
	return strings.ReplaceAll(msg, schemaURL, "schema")
}

// problem is one leaf of a validation error tree.
type problem struct {
	pointer []string
	message string
	// For type mismatches, kept apart so the alternatives of an anyOf or
	// oneOf can be merged into one message.
	typeWant []string
	typeGot  string
}

// firstProblem flattens ve into leaf problems and reports the one with the
// first field path (the library walks object properties in map order, so
// ordering is what makes the report deterministic). Among several problems
// with the same field, which happens when a value fails every branch of an
// anyOf or oneOf, a problem other than a type mismatch is more telling (a
// value of the right type that is out of range); if all are type
// mismatches, their wanted types are merged: "must be integer or string".
func firstProblem(document string, doc any, ve *jsonschema.ValidationError) *FieldError {
	var problems []problem
	collectProblems(ve, &problems)
	if len(problems) == 0 {
		return &FieldError{Field: document, Message: ve.Error()}
	}
	slices.SortStableFunc(problems, func(a, b problem) int {
		if c := slices.Compare(a.pointer, b.pointer); c != 0 {
			return c
		}
		if ta, tb := a.typeWant != nil, b.typeWant != nil; ta != tb {
			if ta {
				return 1
			}
			return -1
		}
		return strings.Compare(a.message, b.message)
	})
	p := problems[0]
	if p.typeWant != nil {
		var want []string
		for _, q := range problems {
			if !slices.Equal(q.pointer, p.pointer) {
				break
			}
			want = append(want, q.typeWant...)
		}
		slices.Sort(want)
		want = slices.Compact(want)
		p.message = fmt.Sprintf("must be %s, got %s", strings.Join(want, " or "), p.typeGot)
	}
	ptr := jsonPointer(p.pointer)
	return &FieldError{Field: fieldName(document, doc, ptr), Pointer: ptr, Message: p.message}
}

func collectProblems(ve *jsonschema.ValidationError, out *[]problem) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collectProblems(c, out)
		}
		return
	}
	loc := slices.Clone(ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		// The missing property is the field at fault, not its parent.
		for _, m := range k.Missing {
			*out = append(*out, problem{pointer: append(slices.Clone(loc), m), message: "is required"})
		}
		return
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			*out = append(*out, problem{pointer: append(slices.Clone(loc), p), message: "is not an allowed field"})
		}
		return
	}
	p := problem{pointer: loc, message: kindMessage(ve.ErrorKind)}
	if k, ok := ve.ErrorKind.(*kind.Type); ok {
		p.typeWant, p.typeGot = slices.Clone(k.Want), k.Got
	}
	*out = append(*out, p)
}

// kindMessage phrases a validation failure as a short predicate about the
// field ("must be <= 600"); kinds without a phrasing here use the library's
// message.
func kindMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return fmt.Sprintf("must be %s, got %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Maximum:
		return "must be <= " + ratString(k.Want)
	case *kind.Minimum:
		return "must be >= " + ratString(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be < " + ratString(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be > " + ratString(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + ratString(k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long", k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d items", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items", k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d fields", k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d fields", k.Want)
	case *kind.Pattern:
		return fmt.Sprintf("must match the pattern %q", k.Want)
	case *kind.Enum:
		vals := make([]string, len(k.Want))
		for i, v := range k.Want {
			vals[i] = jsonText(v)
		}
		return "must be one of " + strings.Join(vals, ", ")
	case *kind.Const:
		return "must be " + jsonText(k.Want)
	case *kind.FalseSchema:
		return "is not allowed"
	}
	return k.LocalizedString(printer)
}

func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func jsonPointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		sb.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return sb.String()
}

// fieldName turns a JSON pointer into a dotted field path under document,
// writing array indices as [i] by walking doc along the pointer (a pointer
// alone cannot tell an index from a key named "0").
func fieldName(document string, doc any, pointer string) string {
	if pointer == "" {
		return document
	}
	var sb strings.Builder
	sb.WriteString(document)
	cur := doc
	for _, raw := range strings.Split(pointer[1:], "/") {
		tok := strings.ReplaceAll(strings.ReplaceAll(raw, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case []any:
			sb.WriteString("[" + tok + "]")
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(c) {
				cur = c[i]
			} else {
				cur = nil
			}
		case map[string]any:
			sb.WriteString("." + tok)
			cur = c[tok]
		default:
			sb.WriteString("." + tok)
			cur = nil
		}
	}
	return sb.String()
}
