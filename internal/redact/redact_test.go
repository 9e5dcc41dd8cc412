package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

const token = "ghp_S3cr3t/Tok+en&x=1<y>"

func TestEveryEncoding(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{"GITHUB_TOKEN": token})
	jsonOnce, err := json.Marshal(token)
	require.NoError(t, err)
	jsonTwice, err := json.Marshal(string(jsonOnce))
	require.NoError(t, err)
	for name, form := range map[string]string{
		"raw":            token,
		"hex":            hex.EncodeToString([]byte(token)),
		"HEX":            strings.ToUpper(hex.EncodeToString([]byte(token))),
		"base64":         base64.StdEncoding.EncodeToString([]byte(token)),
		"base64 raw":     base64.RawStdEncoding.EncodeToString([]byte(token)),
		"base64url":      base64.URLEncoding.EncodeToString([]byte(token)),
		"base64url raw":  base64.RawURLEncoding.EncodeToString([]byte(token)),
		"query escaped":  url.QueryEscape(token),
		"path escaped":   url.PathEscape(token),
		"lower percent":  lowerPercent(url.QueryEscape(token)),
		"json":           string(jsonOnce[1 : len(jsonOnce)-1]),
		"json twice":     string(jsonTwice[1 : len(jsonTwice)-1]),
		"json no html":   `ghp_S3cr3t/Tok+en&x=1<y>`,
		"json \\u003c":   `ghp_S3cr3t/Tok+en\u0026x=1\u003cy\u003e`,
		"percent %20":    strings.ReplaceAll(url.QueryEscape(token+" z"), "+", "%20"),
		"query with +":   url.QueryEscape(token + " z"),
		"embedded twice": token + "|" + token,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := "before " + form + " after"
			out := r.String(in)
			require.Contains(t, out, "[REDACTED:GITHUB_TOKEN]")
			require.True(t, strings.HasPrefix(out, "before "), out)
			require.True(t, strings.HasSuffix(out, " after"), out)
			require.NotContains(t, out, form)
			require.Equal(t, out, string(r.Bytes([]byte(in))), "Bytes and String agree")
			require.True(t, r.Contains(in))
		})
	}
}

// TestBase64Alignments: the value inside a longer base64 string, at every
// alignment, with any bytes around it, is found; so is basic authentication.
func TestBase64Alignments(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{"PASSWORD": token})
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		for prefix := range 6 {
			for suffix := range 4 {
				plain := strings.Repeat("\xfe", prefix) + token + strings.Repeat("\x01", suffix)
				encoded := enc.EncodeToString([]byte(plain))
				out := r.String("data:" + encoded + ";")
				require.Contains(t, out, "[REDACTED:PASSWORD]", "prefix %d suffix %d: %s", prefix, suffix, encoded)
				// What is left decodes to no more than a few bits of the
				// value at each end.
				require.Less(t, len(out), len("data:"+encoded+";"))
			}
		}
	}
	basic := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("deploy-bot:"+token))
	require.Contains(t, r.String(basic), "[REDACTED:PASSWORD]")
}

func TestShortValuesAreNotRedacted(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{"SHORT": "abc12", "EMPTY": "", "OK": "abc123"})
	require.Equal(t, "abc12 and [REDACTED:OK]", r.String("abc12 and abc123"))
	require.Equal(t, "x", r.String("x"))
	require.True(t, New(map[string]string{"A": "12345"}).Empty())
	require.True(t, New(nil).Empty())
}

func TestNilRedactorRedactsNothing(t *testing.T) {
	t.Parallel()
	var r *Redactor
	require.True(t, r.Empty())
	require.Equal(t, "secret", r.String("secret"))
	require.Equal(t, []byte("secret"), r.Bytes([]byte("secret")))
	require.JSONEq(t, `{"a":1}`, string(r.JSON(json.RawMessage(`{"a":1}`))))
	var buf bytes.Buffer
	w := r.Writer(&buf)
	_, err := w.Write([]byte("line\n"))
	require.NoError(t, err)
	require.Equal(t, "line\n", buf.String())
}

func TestOverlappingSecrets(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{
		"A": "abcdefgh12",
		"B": "gh12345678",
		"C": "0123456789abcdef",
		"D": "456789ab",
	})
	// A and B overlap: the union goes, naming both.
	require.Equal(t, "xx[REDACTED:A][REDACTED:B]yy", r.String("xxabcdefgh12345678yy"))
	// D lies inside C: only C is named; alone, D is named.
	require.Equal(t, "<[REDACTED:C]>", r.String("<0123456789abcdef>"))
	require.Equal(t, "<[REDACTED:D]>", r.String("<456789ab>"))
	// Adjacent, not overlapping: two replacements.
	require.Equal(t, "[REDACTED:A][REDACTED:D]", r.String("abcdefgh12456789ab"))
	// Repeats of one secret overlapping themselves collapse into one.
	rr := New(map[string]string{"AAA": "aaaaaaaa"})
	require.Equal(t, "<[REDACTED:AAA]>", rr.String("<aaaaaaaaaaaaa>"))
}

func TestSameValueUnderTwoNames(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{"SECOND": "shared-value", "FIRST": "shared-value"})
	require.Equal(t, "[REDACTED:FIRST]", r.String("shared-value"))
}

func TestLongValueTruncated(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789abcdefghijklmnopqrstuv", 8) // 256 bytes
	r := New(map[string]string{"LONG": long})
	require.Equal(t, "<[REDACTED:LONG]>", r.String("<"+long+">"))
	// A truncated copy that keeps at least 64 bytes is redacted as far as
	// it goes.
	require.Equal(t, "<[REDACTED:LONG]…", r.String("<"+long[:100]+"…"))
	hexLong := hex.EncodeToString([]byte(long))
	require.Equal(t, "<[REDACTED:LONG]", r.String("<"+hexLong[:70]))
	// Fewer than 64 bytes of it are not recognised.
	require.Equal(t, long[:40], r.String(long[:40]))
}

func TestJSONStaysValid(t *testing.T) {
	t.Parallel()
	quoted := `pa"ss\word-123`
	r := New(map[string]string{"TOKEN": token, "QUOTED": quoted, "DIGITS": "31415926535"})
	enc, err := json.Marshal(map[string]any{
		"stdout":        "the token is " + token + "\n",
		"nested":        []any{map[string]any{"k": quoted}, 1.5, true, nil},
		"key " + token:  "value",
		"b64":           base64.StdEncoding.EncodeToString([]byte(token)),
		"number_secret": json.Number("31415926535"),
		"other":         json.Number("12.5e3"),
	})
	require.NoError(t, err)
	out := r.JSON(enc)
	require.True(t, json.Valid(out), "%s", out)
	require.NotContains(t, string(out), token)
	require.NotContains(t, string(out), "31415926535")
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, "the token is [REDACTED:TOKEN]\n", got["stdout"])
	require.Equal(t, "value", got["key [REDACTED:TOKEN]"])
	require.Equal(t, "[REDACTED:QUOTED]", got["nested"].([]any)[0].(map[string]any)["k"])
	require.Equal(t, "[REDACTED:TOKEN]", got["b64"])
	require.Equal(t, "[REDACTED:DIGITS]", got["number_secret"], "a number holding a secret becomes a string")
	require.Equal(t, 12.5e3, got["other"])

	// A secret that spans the document's structure does not break it.
	tricky := New(map[string]string{"T": `a","b":"c`})
	doc := json.RawMessage(`{"x":"a","b":"c"}`)
	require.True(t, json.Valid(tricky.JSON(doc)))

	// Escapes that hide the secret from a byte scan are decoded first.
	hidden := json.RawMessage(`{"out":"\u0067hp_S3cr3t\/Tok+en\u0026x=1\u003cy\u003e"}`)
	out = r.JSON(hidden)
	require.JSONEq(t, `{"out":"[REDACTED:TOKEN]"}`, string(out))

	// Unchanged documents come back as they were, formatting included.
	plain := json.RawMessage("{\n  \"a\": \"nothing here\"\n}")
	require.Equal(t, plain, r.JSON(plain))
	// Invalid JSON is redacted as bytes.
	require.Equal(t, `{"a": "[REDACTED:TOKEN]"`, string(r.JSON(json.RawMessage(`{"a": "`+token+`"`))))
	require.Equal(t, `[REDACTED:TOKEN]`, string(r.JSON(json.RawMessage(token))))
	// Two values are not one document.
	require.Equal(t, `{"a":"[REDACTED:TOKEN]"} {}`, string(r.JSON(json.RawMessage(`{"a":"`+token+`"} {}`))))
}

func TestWriterAcrossSplitWrites(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{"TOKEN": token})
	var buf bytes.Buffer
	w := r.Writer(&buf)
	line := "level=INFO msg=\"calling api\" auth=" + token + "\n"
	// Every split point, byte by byte too.
	for cut := range len(line) {
		buf.Reset()
		_, err := w.Write([]byte(line[:cut]))
		require.NoError(t, err)
		_, err = w.Write([]byte(line[cut:]))
		require.NoError(t, err)
		require.Equal(t, "level=INFO msg=\"calling api\" auth=[REDACTED:TOKEN]\n", buf.String(), "cut at %d", cut)
	}
	buf.Reset()
	for i := range len(line) {
		_, err := w.Write([]byte{line[i]})
		require.NoError(t, err)
	}
	require.Equal(t, "level=INFO msg=\"calling api\" auth=[REDACTED:TOKEN]\n", buf.String())

	// A partial line waits for its end, or for Flush.
	buf.Reset()
	_, err := w.Write([]byte("tail " + token[:5]))
	require.NoError(t, err)
	require.Empty(t, buf.String())
	_, err = w.Write([]byte(token[5:]))
	require.NoError(t, err)
	require.NoError(t, w.Flush())
	require.Equal(t, "tail [REDACTED:TOKEN]", buf.String())
}

func TestWriterLongLineNeverCutsASecret(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{"TOKEN": token})
	var buf bytes.Buffer
	w := r.Writer(&buf)
	filler := strings.Repeat("x", 1000)
	var want strings.Builder
	// 200 KiB without a line break, a secret every ~1 KiB, written in
	// chunks that cut through the secrets.
	var all strings.Builder
	for range 200 {
		all.WriteString(filler + token)
		want.WriteString(filler + "[REDACTED:TOKEN]")
	}
	data := all.String()
	for i := 0; i < len(data); i += 777 {
		_, err := w.Write([]byte(data[i:min(i+777, len(data))]))
		require.NoError(t, err)
	}
	require.NotEmpty(t, buf.String(), "a long line is passed on before its end")
	require.NoError(t, w.Flush())
	require.Equal(t, want.String(), buf.String())
}

// TestWriterFollowsCurrentRedactor: a holder swaps in a new redactor and the
// writer uses it from the next write.
func TestWriterFollowsCurrentRedactor(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	cur := New(nil)
	var buf bytes.Buffer
	w := NewWriter(&buf, func() *Redactor { mu.Lock(); defer mu.Unlock(); return cur })
	_, err := fmt.Fprintf(w, "first %s\n", token)
	require.NoError(t, err)
	mu.Lock()
	cur = New(map[string]string{"TOKEN": token})
	mu.Unlock()
	_, err = fmt.Fprintf(w, "second %s\n", token)
	require.NoError(t, err)
	require.Equal(t, "first "+token+"\nsecond [REDACTED:TOKEN]\n", buf.String())
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("disk full") }

func TestWriterReportsErrors(t *testing.T) {
	t.Parallel()
	w := New(map[string]string{"TOKEN": token}).Writer(failingWriter{})
	_, err := w.Write([]byte("a line\n"))
	require.ErrorContains(t, err, "disk full")
	require.NoError(t, w.Flush(), "the failed line was dropped, not kept")
}

// TestRandomProperty: whatever the secrets and the text, no value (or its
// hex or base64 form) survives redaction. Seeded, so it is deterministic.
func TestRandomProperty(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcAB01_-/+=%"
	randString := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for round := range 300 {
		secrets := map[string]string{}
		for i := range 1 + rng.IntN(5) {
			secrets[fmt.Sprintf("S%d", i)] = randString(MinLength + rng.IntN(20))
		}
		r := New(secrets)
		var text strings.Builder
		for range 20 {
			switch rng.IntN(4) {
			case 0:
				text.WriteString(randString(rng.IntN(10)))
			case 1:
				text.WriteString(secrets[fmt.Sprintf("S%d", rng.IntN(len(secrets)))])
			case 2:
				text.WriteString(hex.EncodeToString([]byte(secrets[fmt.Sprintf("S%d", rng.IntN(len(secrets)))])))
			case 3:
				text.WriteString(base64.StdEncoding.EncodeToString([]byte(randString(rng.IntN(3)) + secrets[fmt.Sprintf("S%d", rng.IntN(len(secrets)))])))
			}
		}
		out := r.String(text.String())
		for name, v := range secrets {
			require.NotContains(t, out, v, "round %d: %s in %q", round, name, text.String())
			require.NotContains(t, out, hex.EncodeToString([]byte(v)), "round %d", round)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	r := New(map[string]string{"TOKEN": token})
	var wg sync.WaitGroup
	var buf bytes.Buffer
	w := r.Writer(&buf)
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				require.Equal(t, fmt.Sprintf("%d [REDACTED:TOKEN]", i), r.String(fmt.Sprintf("%d %s", i, token)))
				_, _ = fmt.Fprintf(w, "%d %s\n", i, token)
			}
		})
	}
	wg.Wait()
	require.NotContains(t, buf.String(), token)
	require.Equal(t, 400, strings.Count(buf.String(), "[REDACTED:TOKEN]\n"))
}

// benchSecrets are 20 secrets of typical API-key length.
func benchSecrets() map[string]string {
	rng := rand.New(rand.NewPCG(3, 4))
	out := map[string]string{}
	for i := range 20 {
		b := make([]byte, 30)
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		out[fmt.Sprintf("SECRET_%d", i)] = "sk-" + base64.RawURLEncoding.EncodeToString(b)
	}
	return out
}

// benchPayload is 64 KiB of JSON-ish text; with secrets, a few of them in
// several encodings.
func benchPayload(secrets map[string]string, withSecrets bool) []byte {
	var b bytes.Buffer
	b.WriteString(`{"stdout":"`)
	line := `total 48\ndrwxr-xr-x  5 user staff  160 Mar  4 05:06 src\n-rw-r--r--  1 user staff 2048 Mar  4 05:06 README.md\n`
	for b.Len() < 64<<10 {
		b.WriteString(line)
		if withSecrets && b.Len()%8192 < len(line) {
			v := secrets["SECRET_7"]
			b.WriteString(v + ` ` + base64.StdEncoding.EncodeToString([]byte("user:"+v)) + ` `)
		}
	}
	b.WriteString(`"}`)
	return b.Bytes()
}

func BenchmarkRedact64KiB(b *testing.B) {
	secrets := benchSecrets()
	r := New(secrets)
	for _, tc := range []struct {
		name        string
		withSecrets bool
	}{{"clean", false}, {"with_secrets", true}} {
		payload := benchPayload(secrets, tc.withSecrets)
		b.Run("Bytes/"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				r.Bytes(payload)
			}
		})
		b.Run("JSON/"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				r.JSON(payload)
			}
		})
	}
}

func BenchmarkNew20Secrets(b *testing.B) {
	secrets := benchSecrets()
	b.ReportAllocs()
	for b.Loop() {
		New(secrets)
	}
}

// TestRedactFastEnough guards the benchmark's point: a clean 64 KiB payload
// allocates nothing, so redacting every event costs no garbage.
func TestRedactFastEnough(t *testing.T) {
	secrets := benchSecrets()
	r := New(secrets)
	payload := benchPayload(secrets, false)
	allocs := testing.AllocsPerRun(10, func() { r.Bytes(payload) })
	require.Zero(t, allocs)
	with := benchPayload(secrets, true)
	out := r.Bytes(with)
	require.NotContains(t, string(out), secrets["SECRET_7"])
	require.Contains(t, string(out), "[REDACTED:SECRET_7]")
}
