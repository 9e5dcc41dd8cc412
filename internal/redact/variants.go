package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
)

// variants returns the forms of value that the redactor looks for (see the
// package comment), without duplicates. The value itself comes first.
func variants(value string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(v string) {
		if len(v) >= MinLength && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	add(value)

	add(hex.EncodeToString([]byte(value)))
	add(strings.ToUpper(hex.EncodeToString([]byte(value))))

	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		add(enc.EncodeToString([]byte(value)))
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		add(enc.EncodeToString([]byte(value)))
		for offset := range 3 {
			add(base64Stable(enc, value, offset))
		}
	}

	for _, v := range []string{url.QueryEscape(value), url.PathEscape(value), strings.ReplaceAll(url.QueryEscape(value), "+", "%20")} {
		add(v)
		add(lowerPercent(v))
	}

	for _, html := range []bool{true, false} {
		once := jsonEscape(value, html)
		add(once)
		add(jsonEscape(once, html))
	}
	return out
}

// base64Stable returns the characters of the base64 encoding of value that
// are the same wherever value sits in a longer byte string, given that it
// starts offset bytes (0, 1 or 2) after a 3-byte boundary. Characters that
// also encode bits of the bytes before or after it are left out: they vary
// with the surroundings.
func base64Stable(enc *base64.Encoding, value string, offset int) string {
	buf := make([]byte, offset+len(value))
	copy(buf[offset:], value)
	s := enc.EncodeToString(buf)
	// The first character that encodes only value's bits: offset 1 starts
	// value at bit 8 of a 24-bit group (characters 0 and 1 mix in the
	// preceding byte), offset 2 at bit 16 (characters 0-2 do).
	start := [3]int{0, 2, 3}[offset]
	end := len(s)
	if len(buf)%3 != 0 {
		// The last character mixes value's last bits with the next byte's.
		end--
	}
	if end <= start {
		return ""
	}
	return s[start:end]
}

// lowerPercent rewrites the hex digits of percent escapes in lower case
// (%2F -> %2f), as some encoders write them.
func lowerPercent(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1] = toLowerHex(b[i+1])
			b[i+2] = toLowerHex(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func toLowerHex(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + ('a' - 'A')
	}
	return c
}

// jsonEscape returns s as it appears between the quotes of a JSON string,
// with or without the \u003c-style escapes of <, > and &.
func jsonEscape(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		return s // a string always encodes
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return string(out[1 : len(out)-1])
}
