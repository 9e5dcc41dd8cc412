// Package redact replaces secret values, and their common encodings, with
// "[REDACTED:NAME]" in text, bytes, JSON documents and log streams. The
// engine runs it over every journal event's payload before it is written,
// which covers tool outputs (and so what the model reads). Log streams can
// be wrapped with Writer; the server does not log secret values to begin
// with.
//
// # What is matched
//
// For each secret value, every occurrence of:
//   - the value itself;
//   - its hexadecimal form, lower and upper case;
//   - its base64 forms, standard and URL alphabets, with and without padding;
//   - the part of its base64 form that does not depend on what surrounds it,
//     for each of the three ways the value can be aligned within a longer
//     base64 string (so "user:VALUE" encoded for HTTP basic authentication,
//     or the value in the middle of an encoded file, is found too);
//   - its URL-encoded forms (query and path escaping, upper- and lower-case
//     percent escapes);
//   - its JSON string escapes (with and without HTML escaping, and escaped
//     twice, as in JSON carried inside a JSON string).
//
// Overlapping occurrences (of one secret's forms, or of two secrets) are
// merged into one replacement that names each secret involved, so no part of
// either survives. A value of 64 bytes or more is also redacted when only its
// beginning appears (at least its first 64 bytes, or of an encoding's): a
// truncated tool output must not leak the part it kept.
//
// Values shorter than MinLength (6) bytes are not redacted: a short string
// occurs by chance in ordinary text too often for its replacement to be
// useful, and it would make the output unreadable. The vault refuses values
// shorter than 8 bytes, so every vault secret is redacted.
//
// # Invariants
//
// A Redactor is immutable and safe for concurrent use; when secrets change,
// the holder builds a new one and swaps it in (NewWriter takes a function
// that returns the current one). A nil *Redactor redacts nothing. Matching
// is one pass of an Aho–Corasick automaton over the input, whatever the
// number of secrets, and allocates nothing when nothing matches, so it can
// run over every event payload. JSON stays valid JSON: secrets are replaced
// inside the decoded strings (and numbers) of the document, which is then
// re-encoded.
//
// It imports only the standard library. Who may import it: cmd/longhaul,
// internal/browser, internal/engine, internal/node, internal/vault and
// tests.
package redact
