package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tiktoken-go/tokenizer"
)

func TestCounterFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		provider, name string
		wantName       string
		wantExact      bool
	}{
		{"openai", "gpt-4o", "o200k_base", true},
		{"openai", "gpt-4o-mini-2024-07-18", "o200k_base", true},
		{"openai", "chatgpt-4o-latest", "o200k_base", true},
		{"openai", "gpt-4.1-nano", "o200k_base", true},
		{"openai", "gpt-4.5-preview", "o200k_base", true},
		{"openai", "gpt-5", "o200k_base", true},
		{"openai", "gpt-5-mini", "o200k_base", true},
		{"openai", "gpt-5.6-sol", "o200k_base", true},
		{"openai", "o1", "o200k_base", true},
		{"openai", "o3-mini", "o200k_base", true},
		{"openai", "o4-mini-2025-04-16", "o200k_base", true},
		{"openai", "codex-mini-latest", "o200k_base", true},
		{"openai", " GPT-4O ", "o200k_base", true},
		{"openai", "gpt-4", "cl100k_base", true},
		{"openai", "gpt-4-turbo-2024-04-09", "cl100k_base", true},
		{"openai", "gpt-4-32k", "cl100k_base", true},
		{"openai", "gpt-3.5-turbo-0125", "cl100k_base", true},
		{"openai", "gpt-6-sol", "estimate (4 bytes per token)", false},
		{"openai", "", "estimate (4 bytes per token)", false},
		{"openai-compatible", "gpt-oss:20b", "o200k_base", true},
		{"openai-compatible", "openai/gpt-oss-120b", "o200k_base", true},
		{"openai-compatible", "llama3.1:8b", "estimate (4 bytes per token)", false},
		{"openai-compatible", "gpt-4o", "estimate (4 bytes per token)", false},
		{"anthropic", "claude-sonnet-4-5-20250929", "estimate (3 bytes per token)", false},
		{"anthropic", "claude-opus-5-5", "estimate (3 bytes per token)", false},
		{"scripted", "demo", "estimate (4 bytes per token)", false},
		{"", "", "estimate (4 bytes per token)", false},
	}
	for _, tt := range tests {
		c := CounterFor(tt.provider, tt.name)
		require.Equal(t, tt.wantName, c.Name(), "%s/%s", tt.provider, tt.name)
		require.Equal(t, tt.wantExact, c.Exact(), "%s/%s", tt.provider, tt.name)
	}
	// One codec per encoding, shared by every model of the family.
	require.Same(t, CounterFor("openai", "gpt-4o"), CounterFor("openai", "o3"))
	require.Same(t, CounterFor("openai", "gpt-4"), CounterFor("openai", "gpt-3.5-turbo"))
}

// TestKnownTokenCounts checks counts that tiktoken itself gives: the first
// six from the tokenizer port's tests (which mirror tiktoken's), the rest from
// OpenAI's cookbook "How to count tokens with tiktoken".
func TestKnownTokenCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		counter Counter
		text    string
		want    int
	}{
		{o200kCounter, "", 0},
		{o200kCounter, "hello world", 2},
		{o200kCounter, "hello   world", 3},
		{o200kCounter, "'RE", 2},
		{o200kCounter, "supercalifragilistic", 6},
		{o200kCounter, "We know what we are, but know not what we may be.", 14},
		{cl100kCounter, "", 0},
		{cl100kCounter, "hello world", 2},
		{cl100kCounter, "hello   world", 3},
		{cl100kCounter, "'RE", 1},
		{cl100kCounter, "supercalifragilistic", 7},
		{cl100kCounter, "We know what we are, but know not what we may be.", 14},
		{cl100kCounter, "tiktoken is great!", 6},
		{cl100kCounter, "antidisestablishmentarianism", 6},
		{cl100kCounter, "2 + 2 = 4", 7},
		{cl100kCounter, "お誕生日おめでとう", 9},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.counter.Count(tt.text), "%s %q", tt.counter.Name(), tt.text)
	}
}

// TestEncodingsAreTheRealOnes compares token ids, not only counts, with
// tiktoken's: a vocabulary that merely splits the same way would not match.
func TestEncodingsAreTheRealOnes(t *testing.T) {
	t.Parallel()
	for enc, want := range map[tokenizer.Encoding][]uint{
		tokenizer.O200kBase:  {24912, 2375},
		tokenizer.Cl100kBase: {15339, 1917},
	} {
		c, err := tokenizer.Get(enc)
		require.NoError(t, err)
		ids, _, err := c.Encode("hello world")
		require.NoError(t, err)
		require.Equal(t, want, ids, enc)
	}
}

func TestEstimateCounter(t *testing.T) {
	t.Parallel()
	four, three := CounterFor("scripted", ""), CounterFor("anthropic", "claude-haiku-5-5")
	tests := []struct {
		text            string
		wantFour, wantT int
	}{
		{"", 0, 0},
		{"a", 1, 1},
		{"abc", 1, 1},
		{"abcd", 1, 2},
		{"abcde", 2, 2},
		{"abcdefgh", 2, 3},
		{"é", 1, 1},         // 2 bytes
		{"お誕生日おめでとう", 7, 9}, // 27 bytes
	}
	for _, tt := range tests {
		require.Equal(t, tt.wantFour, four.Count(tt.text), "%q", tt.text)
		require.Equal(t, tt.wantT, three.Count(tt.text), "%q", tt.text)
	}
}

// TestEstimateOvercountsEnglish checks the documented claim that the
// 4-bytes-per-token estimate errs on the high side for English prose.
func TestEstimateOvercountsEnglish(t *testing.T) {
	t.Parallel()
	prose := strings.Repeat("The agent read the file, found the failing test and fixed the off-by-one error in the loop. ", 20)
	estimate := CounterFor("scripted", "").Count(prose)
	require.GreaterOrEqual(t, estimate, o200kCounter.Count(prose))
	require.GreaterOrEqual(t, estimate, cl100kCounter.Count(prose))
}

func TestTiktokenCounterHandlesInvalidUTF8(t *testing.T) {
	t.Parallel()
	// Invalid bytes are tokenized as bytes, never an error or a panic.
	require.Positive(t, o200kCounter.Count("\xff\xfe"))
	require.Positive(t, cl100kCounter.Count("a\xe8\x96b"))
}

func sampleTools() []ToolDef {
	return []ToolDef{
		{Name: "read_file", Description: "Read a file of the workspace.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"}},"required":["path"]}`)},
		{Name: "shell", Description: "Run a command with sh -c in the workspace.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
	}
}

func TestCountMessagesExactFraming(t *testing.T) {
	t.Parallel()
	c := CounterFor("openai", "gpt-4o")
	require.Equal(t, tokensReplyPrime, CountMessages(c, nil, nil))
	// 3 (reply priming) + 4 (message framing) + 1 ("user") + 2 ("hello world")
	msgs := []Message{{Role: RoleUser, Text: "hello world"}}
	require.Equal(t, 3+4+1+2, CountMessages(c, msgs, nil))
}

func TestCountMessagesCountsEveryPart(t *testing.T) {
	t.Parallel()
	c := CounterFor("openai", "gpt-4.1")
	base := []Message{
		{Role: RoleSystem, Text: "You are a careful engineer."},
		{Role: RoleUser, Text: "Fix the failing test."},
	}
	n0 := CountMessages(c, base, nil)

	// Each addition strictly increases the count by at least its text.
	withCall := append(append([]Message(nil), base...), Message{Role: RoleAssistant, ToolCalls: []ToolCall{
		{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path": "main_test.go"}`)},
	}})
	n1 := CountMessages(c, withCall, nil)
	require.Greater(t, n1, n0+tokensPerMessage+tokensPerToolCall)

	withResult := append(append([]Message(nil), withCall...), Message{Role: RoleTool, CallID: "call_1", Text: "package main\n\nfunc TestX(t *testing.T) {}\n"})
	n2 := CountMessages(c, withResult, nil)
	require.Greater(t, n2, n1+tokensPerMessage+c.Count("package main"))

	twoCalls := append(append([]Message(nil), base...), Message{Role: RoleAssistant, ToolCalls: []ToolCall{
		{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path": "main_test.go"}`)},
		{ID: "call_2", Name: "shell", Arguments: json.RawMessage(`{"command": "go test ./..."}`)},
	}})
	require.Greater(t, CountMessages(c, twoCalls, nil), n1+tokensPerToolCall+c.Count("shell"))

	withReasoning := append(append([]Message(nil), base...), Message{Role: RoleAssistant, Text: "Done.",
		Reasoning: &Reasoning{Provider: "openai", Text: "The loop bound is off by one.", Encrypted: strings.Repeat("x", 4000)}})
	withoutReasoning := append(append([]Message(nil), base...), Message{Role: RoleAssistant, Text: "Done."})
	require.Equal(t, CountMessages(c, withoutReasoning, nil)+c.Count("The loop bound is off by one."),
		CountMessages(c, withReasoning, nil), "readable reasoning counts, opaque content does not")

	// Tools: name, description and schema all count.
	tools := sampleTools()
	nt := CountMessages(c, base, tools)
	want := n0
	for _, tl := range tools {
		want += tokensPerTool + c.Count(tl.Name) + c.Count(tl.Description) + c.Count(string(tl.Parameters))
	}
	require.Equal(t, want, nt)
	require.Greater(t, CountMessages(c, base, tools[:1]), n0)
}

func TestCountMessagesCompactsJSON(t *testing.T) {
	t.Parallel()
	c := CounterFor("openai", "gpt-5")
	compact := []ToolDef{{Name: "t", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)}}
	pretty := []ToolDef{{Name: "t", Parameters: json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\n    \"a\": {\"type\": \"string\"}\n  }\n}")}}
	require.Equal(t, CountMessages(c, nil, compact), CountMessages(c, nil, pretty))

	// Arguments that are not valid JSON are still counted, as they are.
	bad := []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "t", Arguments: json.RawMessage(`{"a": `)}}}}
	require.Equal(t, CountMessages(c, []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "t"}}}}, nil)+c.Count(`{"a": `),
		CountMessages(c, bad, nil))
}

func TestCountMessagesNilCounter(t *testing.T) {
	t.Parallel()
	msgs := []Message{{Role: RoleUser, Text: "hello world"}}
	require.Equal(t, CountMessages(CounterFor("scripted", ""), msgs, nil), CountMessages(nil, msgs, nil))
}

// TestCountersConcurrent runs every counter from many goroutines at once
// (run with -race): the encodings load once and counting shares them.
func TestCountersConcurrent(t *testing.T) {
	t.Parallel()
	counters := []Counter{
		CounterFor("openai", "gpt-4o"), CounterFor("openai", "gpt-4"),
		CounterFor("anthropic", "claude-opus-5-5"), CounterFor("scripted", ""),
	}
	msgs := longContext(8)
	want := make([]int, len(counters))
	for i, c := range counters {
		want[i] = CountMessages(c, msgs, sampleTools())
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, c := range counters {
				if got := CountMessages(c, msgs, sampleTools()); got != want[i] {
					errs <- fmt.Errorf("goroutine %d, %s: got %d, want %d", g, c.Name(), got, want[i])
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// offlineChildEnv marks the child process of TestEncodingsLoadOffline.
const offlineChildEnv = "LONGHAUL_MODEL_TOKENS_OFFLINE_CHILD"

// TestEncodingsLoadOffline loads both encodings for the first time in a fresh
// process whose proxies point at a closed port and whose home, cache and temp
// directories are empty: a tokenizer that fetched or cached its vocabulary at
// run time would fail there. (The encodings are Go source compiled into the
// binary; CI also runs this package without a network.)
func TestEncodingsLoadOffline(t *testing.T) {
	if os.Getenv(offlineChildEnv) == "1" {
		require.Equal(t, 14, o200kCounter.Count("We know what we are, but know not what we may be."))
		require.Equal(t, 7, cl100kCounter.Count("supercalifragilistic"))
		require.True(t, o200kCounter.Exact())
		require.True(t, cl100kCounter.Exact())
		return
	}
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	empty := t.TempDir()
	cmd := exec.Command(exe, "-test.run=^TestEncodingsLoadOffline$", "-test.count=1")
	cmd.Dir = empty
	cmd.Env = []string{
		offlineChildEnv + "=1",
		"HOME=" + empty, "XDG_CACHE_HOME=" + empty, "TMPDIR=" + empty,
		"HTTP_PROXY=http://127.0.0.1:1", "HTTPS_PROXY=http://127.0.0.1:1", "ALL_PROXY=http://127.0.0.1:1",
		"http_proxy=http://127.0.0.1:1", "https_proxy=http://127.0.0.1:1", "NO_PROXY=", "no_proxy=",
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child: %s", out)
	require.Contains(t, string(out), "PASS")
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	require.Empty(t, entries, "the tokenizer wrote files at run time")
}

// longContext builds a context of n messages in the shape of a long agent
// session: an instruction, then rounds of a tool call, its result and a
// short note.
func longContext(n int) []Message {
	msgs := []Message{{Role: RoleSystem, Text: strings.Repeat("Follow the constraints exactly. Never push to main. ", 20)}}
	for i := 1; len(msgs) < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: id, Name: "read_file",
				Arguments: json.RawMessage(fmt.Sprintf(`{"path": "internal/pkg%d/file.go"}`, i))}}},
			Message{Role: RoleTool, CallID: id, Text: strings.Repeat(fmt.Sprintf("func f%d() int { return %d }\n", i, i), 40)},
			Message{Role: RoleAssistant, Text: "Read it; the bug is elsewhere.",
				Reasoning: &Reasoning{Provider: "openai", Text: "Check the caller next."}},
		)
	}
	return msgs[:n]
}

func TestCountCacheGivesTheSameCounts(t *testing.T) {
	t.Parallel()
	fresh := newTiktokenCounter(tokenizer.O200kBase)
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20) // >= countCacheMinBytes
	first := fresh.Count(long)
	c, err := tokenizer.Get(tokenizer.O200kBase)
	require.NoError(t, err)
	want, err := c.Count(long)
	require.NoError(t, err)
	require.Equal(t, want, first)
	n, ok := fresh.cache.get(long)
	require.True(t, ok, "a long text is remembered")
	require.Equal(t, want, n)
	require.Equal(t, want, fresh.Count(long))
	// A text one byte longer is a different key.
	wantLonger, err := c.Count(long + "!")
	require.NoError(t, err)
	require.Equal(t, wantLonger, fresh.Count(long+"!"))

	_, ok = fresh.cache.get("short text")
	require.False(t, ok)
	fresh.Count("short text")
	_, ok = fresh.cache.get("short text")
	require.False(t, ok, "short texts are cheaper to count than to remember")
}

func TestCountCacheGenerations(t *testing.T) {
	t.Parallel()
	c := newCountCache()
	text := func(i int) string { return fmt.Sprintf("%0*d", countCacheMinBytes, i) }
	for i := range countCacheEntries {
		c.put(text(i), i)
	}
	require.Len(t, c.cur, countCacheEntries)
	// The next entry starts a new generation; the old one is still found,
	// and a hit moves an entry into the current generation.
	c.put(text(countCacheEntries), countCacheEntries)
	require.Len(t, c.cur, 1)
	require.Len(t, c.prev, countCacheEntries)
	n, ok := c.get(text(0))
	require.True(t, ok)
	require.Equal(t, 0, n)
	require.Len(t, c.cur, 2)
	// Another full generation drops the entries that were not used.
	for i := countCacheEntries + 1; len(c.cur) < countCacheEntries; i++ {
		c.put(text(i), i)
	}
	c.put(text(3*countCacheEntries), 1)
	_, ok = c.get(text(1))
	require.False(t, ok, "an entry unused for two generations is dropped")
	n, ok = c.get(text(0))
	require.True(t, ok, "an entry used in the last generation survives")
	require.Equal(t, 0, n)
}

// BenchmarkCountMessages counts a 100-message context (about 40 kB of
// text). "cold" counts every text with the tokenizer, as the first count of a
// context does; the others count again, as each later turn does.
func BenchmarkCountMessages(b *testing.B) {
	msgs := longContext(100)
	tools := sampleTools()
	for _, enc := range []tokenizer.Encoding{tokenizer.O200kBase, tokenizer.Cl100kBase} {
		b.Run(string(enc)+"/cold", func(b *testing.B) {
			newTiktokenCounter(enc).Count("warm up") // load the encoding outside the timing
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				c := newTiktokenCounter(enc)
				b.StartTimer()
				if CountMessages(c, msgs, tools) <= 0 {
					b.Fatal("empty count")
				}
			}
		})
	}
	for _, c := range []Counter{CounterFor("openai", "gpt-4o"), CounterFor("openai", "gpt-4"), CounterFor("anthropic", "claude-sonnet-5-5")} {
		b.Run(c.Name(), func(b *testing.B) {
			CountMessages(c, msgs, tools) // load the encoding outside the timing
			b.ReportAllocs()
			for b.Loop() {
				if CountMessages(c, msgs, tools) <= 0 {
					b.Fatal("empty count")
				}
			}
		})
	}
}

// compactJSONByCompact is compactJSON as it was first written: every
// document through json.Compact.
func compactJSONByCompact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// TestCompactJSONAsCompactGivesIt: the shortcut for a document with no
// white space outside its strings gives what json.Compact gives, for valid
// and invalid JSON, escapes, spaces inside and outside strings.
func TestCompactJSONAsCompactGivesIt(t *testing.T) {
	cases := []string{
		``, `{}`, `{"a":1}`, `{"a": 1}`, ` {"a":1}`, "{\"a\":1}\n", `{"a b":"c d"}`,
		`{"a":"x\"y z"}`, `{"a":"x\\"}`, `{"a":"x\\" , "b":1}`, `{"a":"x\\\" y"}`,
		`["\t",1, 2]`, "[\"\\t\"\t]", `{"<>&":"\u2028 é"}`, "{\"a\":\"\xff \"}", `"unterminated`, `{"a":`,
		`{"a":"\"", "b":1}`, `{"a" 1}`, `not json`, `not  json`, `12`, ` 12`, `[1,[2,[3 ]]]`, `{"a":"\\\\"}`, `{"a":"\\\\" }`,
	}
	for _, c := range cases {
		require.Equal(t, compactJSONByCompact(json.RawMessage(c)), compactJSON(json.RawMessage(c)), "%q", c)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("{}[]:,\"\\ \t\n\rab1-.eE")
	for range 20000 {
		b := make([]byte, rng.IntN(16))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		require.Equal(t, compactJSONByCompact(b), compactJSON(b), "%q", b)
	}
	// Valid documents, compact or indented, with strings holding quotes,
	// backslashes and white space.
	words := []string{"a", "b c", `q"uote`, `back\slash`, "tab\t", "\n", " ", `\"`, "é"}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(5); {
		case depth > 3 || k == 0:
			return words[rng.IntN(len(words))]
		case k == 1:
			return rng.Float64() * 1000
		case k == 2:
			a := make([]any, rng.IntN(4))
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		default:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[words[rng.IntN(len(words))]] = value(depth + 1)
			}
			return m
		}
	}
	for range 2000 {
		raw, err := json.Marshal(value(0))
		require.NoError(t, err)
		if rng.IntN(2) == 0 {
			var b bytes.Buffer
			require.NoError(t, json.Indent(&b, raw, " ", "\t"))
			raw = b.Bytes()
		}
		require.Equal(t, compactJSONByCompact(raw), compactJSON(raw), "%q", raw)
	}
}
