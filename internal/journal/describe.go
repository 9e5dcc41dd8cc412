package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"
)

// The plain-language lines a person reads in the ledger, the inbox and
// approvals: what a call does, naming who or what it affects first, and
// what came of it. They live here because the ledger's rows are part of the
// projection (each effect carries its summary and result); the engine uses
// the same words for its approvals. Every line is bounded, so a large
// argument or output never makes a large row.

// maxLineBytes bounds every line built here.
const maxLineBytes = 200

// DescribeCall says in one line what a call of tool with args does, naming
// who or what it affects first: "Email to bob@example.com: “Quarterly
// numbers”", "Run `sh stats.sh` in the workspace", "POST to
// api.example.com/v1/items", "Write notes.md (1204 bytes)". A call it has
// no words for reads as the tool's name with its arguments, the affected
// ones (addresses, URLs) first.
func DescribeCall(tool string, args json.RawMessage) string {
	// Fields are decoded only as needed: the projection describes every
	// call, and a write's content may be large.
	var decoded fields
	done := false
	field := func() fields {
		if !done {
			decoded, done = decodeFields(args), true
		}
		return decoded
	}
	str := func(k string) string { return field().str(k) }
	var line string
	switch tool {
	case "shell":
		line = "Run " + code(str("command")) + " in the workspace"
	case "write_file":
		line = fmt.Sprintf("Write %s (%s)", orUnnamed(str("path")), byteCount(len(str("content"))))
	case "edit_file":
		line = fmt.Sprintf("Edit %s: replace %s with %s", orUnnamed(str("path")), quote(str("old"), 40), quote(str("new"), 40))
	case "read_file":
		line = "Read " + orUnnamed(str("path"))
	case "list_files":
		line = "List the files in " + cmpOr(str("path"), ".")
	case "http_request":
		method := strings.ToUpper(cmpOr(str("method"), "GET"))
		target := hostPath(str("url"))
		if method == "GET" || method == "HEAD" {
			line = method + " " + target
		} else {
			line = method + " to " + target
		}
	case "sqlite_query":
		line = fmt.Sprintf("Query %s: %s", orUnnamed(str("database")), oneLine(str("sql")))
	case "browser":
		line = "Browser: " + strings.TrimSpace(str("action")+" "+cmpOr(str("url"), str("selector")))
	case "sleep":
		line = fmt.Sprintf("Wait %v s", field().value("seconds"))
	case "wait_for_signal":
		line = "Wait for the signal " + quote(str("name"), 60)
	case "spawn_agent":
		line = "Start a sub-agent " + quote(cmpOr(str("agent"), oneLine(str("instructions"))), 60) + ": " + oneLine(str("input"))
	case "checkpoint":
		line = "Checkpoint " + quote(str("name"), 60)
	case "ask_human":
		line = "Ask a person: " + oneLine(str("question"))
	case "finish":
		line = "Finish: " + oneLine(str("summary"))
	default:
		return describeOther(tool, args)
	}
	return Clip(line, maxLineBytes)
}

// describeOther describes a call of a tool with no words of its own: an
// email if it names recipients, else its name and arguments. Its
// arguments are decoded once, for both.
func describeOther(tool string, args json.RawMessage) string {
	var m map[string]any
	_ = json.Unmarshal(args, &m)
	str := func(k string) string { s, _ := m[k].(string); return s }
	if to := emailRecipients(m["to"]); to != "" {
		line := "Email to " + to
		if subj := cmpOr(str("subject"), str("title")); subj != "" {
			line += ": " + quote(subj, 80)
		}
		return Clip(line, maxLineBytes)
	}
	line := tool
	if args := argumentList(m, true); args != "" {
		line += ": " + args
	}
	return Clip(line, maxLineBytes)
}

// RawCall is the call as code, tool(name=value, …) with its arguments in
// name order, each value clipped: what a person who wants the exact call
// reads next to DescribeCall's words.
func RawCall(tool string, args json.RawMessage) string {
	var m map[string]any
	_ = json.Unmarshal(args, &m)
	return tool + "(" + argumentList(m, false) + ")"
}

// DescribeResult says in one line what came of a call: its error, or what
// its output says (a shell command's exit status and first line, a
// write's size, an HTTP status).
func DescribeResult(output json.RawMessage, errMsg string) string {
	if errMsg != "" {
		return Clip("failed: "+oneLine(errMsg), maxLineBytes)
	}
	m := decodeFields(output)
	if m == nil {
		s := strings.TrimSpace(string(output))
		if s == "" || s == "null" {
			return "done"
		}
		return Clip(oneLine(s), maxLineBytes)
	}
	str := m.str
	num := func(k string) (float64, bool) { f, ok := m.value(k).(float64); return f, ok }
	var line string
	switch {
	case has(m, "exit_code") && has(m, "stdout"):
		code, _ := num("exit_code")
		line = fmt.Sprintf("exit %d", int(code))
		if m.value("timed_out") == true {
			line += ", timed out"
		}
		if sig := str("signal"); sig != "" {
			line += ", killed by " + sig
		}
		if first := firstLine(str("stdout")); first != "" {
			line += ": " + first
		} else if first := firstLine(str("stderr")); first != "" {
			line += ": " + first
		}
	case has(m, "status") && has(m, "body"):
		status, _ := num("status")
		line = fmt.Sprintf("HTTP %d", int(status))
		if first := firstLine(str("body")); first != "" {
			line += ": " + first
		}
	case has(m, "path") && has(m, "bytes") && has(m, "sha256"):
		n, _ := num("bytes")
		line = fmt.Sprintf("wrote %s to %s", byteCount(int(n)), str("path"))
	case has(m, "path") && has(m, "content"):
		size, _ := num("size")
		line = fmt.Sprintf("read %s (%s)", str("path"), byteCount(int(size)))
	case has(m, "path") && has(m, "sha256"):
		line = "edited " + str("path")
	default:
		var compact bytes.Buffer
		if json.Compact(&compact, output) != nil {
			return "done"
		}
		line = compact.String()
	}
	return Clip(line, maxLineBytes)
}

// fields are a JSON object's members, each decoded only when asked for.
type fields map[string]json.RawMessage

// decodeFields is nil unless raw is a JSON object.
func decodeFields(raw json.RawMessage) fields {
	var f fields
	if json.Unmarshal(raw, &f) != nil {
		return nil
	}
	return f
}

func (f fields) str(k string) string {
	var s string
	_ = json.Unmarshal(f[k], &s)
	return s
}

func (f fields) value(k string) any {
	var v any
	_ = json.Unmarshal(f[k], &v)
	return v
}

func has(f fields, k string) bool { _, ok := f[k]; return ok }

// argumentList is name=value, … in name order; with affectedFirst, values
// that name who or what is affected (an address, a URL) come first.
func argumentList(m map[string]any, affectedFirst bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if affectedFirst {
		sort.SliceStable(keys, func(i, j int) bool { return names(m[keys[i]]) && !names(m[keys[j]]) })
	}
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // a person reads this: "&", not "\u0026"
		_ = enc.Encode(m[k])
		parts = append(parts, k+"="+Clip(strings.TrimSuffix(buf.String(), "\n"), 120))
	}
	return strings.Join(parts, ", ")
}

// names reports whether v is a string that names someone or something
// outside a call affects: an email address or a URL.
func names(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	return LooksLikeEmail(s) || LooksLikeURL(s)
}

// emailRecipients is the addresses of a "to" argument (a string or a list
// of strings), "" unless every one looks like an email address.
func emailRecipients(v any) string {
	var list []string
	switch x := v.(type) {
	case string:
		list = []string{x}
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return ""
			}
			list = append(list, s)
		}
	}
	if len(list) == 0 {
		return ""
	}
	for _, s := range list {
		if !LooksLikeEmail(s) {
			return ""
		}
	}
	return strings.Join(list, ", ")
}

// LooksLikeEmail reports whether s has the shape of an email address.
func LooksLikeEmail(s string) bool {
	at := strings.LastIndexByte(s, '@')
	return at > 0 && at < len(s)-3 && strings.Contains(s[at:], ".") && !strings.ContainsAny(s, " \n\t")
}

// LooksLikeURL reports whether s is an absolute http(s) URL.
func LooksLikeURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// hostPath is a URL as a person names the place: host and path, without
// the scheme, query or fragment (which may carry tokens).
func hostPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return orUnnamed(Clip(raw, 120))
	}
	p := u.Host + u.EscapedPath()
	if u.RawQuery != "" {
		p += "?…"
	}
	return Clip(p, 120)
}

func code(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "an empty command"
	}
	return "`" + oneLine(s) + "`"
}

func quote(s string, n int) string { return "“" + Clip(oneLine(s), n) + "”" }

func orUnnamed(s string) string { return cmpOr(s, "(no path)") }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// oneLine is s's first line, marked "…" when more follows, clipped.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	return Clip(s, 120)
}

// firstLine is s's first non-blank line, clipped.
func firstLine(s string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return Clip(l, 80)
		}
	}
	return ""
}

func byteCount(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// Clip shortens s to at most n bytes on a rune boundary, marking the
// cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
