// Package jsonstrict holds a JSON document to one reading. encoding/json
// accepts documents that two parsers read differently: a key given twice in
// an object (encoding/json keeps the last; another parser may keep the
// first), keys that differ only in case where a struct takes them
// (encoding/json matches a field's name case-insensitively, so "Tools"
// overwrites "tools"), an escaped lone surrogate such as "\ud800" and bytes
// that are not UTF-8 (both read as U+FFFD, which another parser may not
// do). When such a document grants something, a person approving it, a log
// or a UI can read one thing while the server runs another: a parser
// differential. RFC 8259 says the names of an object SHOULD be unique and
// JSON text MUST be UTF-8; these checks refuse the rest, naming the place.
//
// Two documents go through it: an API request's body (internal/server,
// before a 400) and the arguments of a model's spawn_agent call, whose
// agent_spec the model writes (internal/engine, before a child is made).
//
// Every refusal is an *Error: a message that names the place (a dotted path
// with [i] for array elements, "agent_spec.tools[1].name", or a byte
// offset), and the path alone for a caller that reports it apart (an API
// error's "field"; Invalid makes it that 400). Paths are elided past 256
// bytes, and built only when a refusal names one, so a document nested as
// deep as JSON allows is read in memory proportional to its size. The
// walkers that find a path (ValuePathAt, UnknownFieldPath) also name the
// place of encoding/json's own errors, which it gives without array
// indices or by the last key only.
//
// It imports the standard library and internal/apierror only. Who may
// import it: internal/engine, internal/server and tests.
package jsonstrict
