package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Token counting decides when a context is compacted (the threshold is a
// fraction of the context window), so a count must be cheap, offline and, when
// it cannot be exact, err on the high side: counting too many tokens compacts
// a little early, counting too few makes the provider refuse the call.
//
// OpenAI's tokenizers are public and a Go port of tiktoken ships their
// encodings compiled into the binary (no download at run time), so OpenAI
// models are counted exactly. Anthropic's tokenizer is not public and local
// models have tokenizers of their own, so everything else is estimated.

// Counter counts tokens of text for one model family.
type Counter interface {
	Count(text string) int
	// Exact reports whether counts come from the model family's real
	// tokenizer (false: an estimate).
	Exact() bool
	Name() string // e.g. "o200k_base", "cl100k_base", "estimate (4 bytes per token)"
}

// Estimate rules, in bytes of UTF-8 per token. tiktoken's encodings average
// 4 to 5 bytes per token on English prose and about 3.5 on source code.
// Anthropic's documentation says the tokenizer of Claude 4.7 and later models
// turns the same text into about 30 % more tokens than the one before it
// (itself a little denser than OpenAI's), which puts Claude near 3.3 bytes per
// token on prose. So Claude is estimated at 3 bytes per token and everything
// else at 4: both overcount English prose (a safe error for a threshold), and
// both undercount only text denser than that (emoji, some scripts), which the
// default threshold's 30 % headroom absorbs.
const (
	estimateBytesPerToken       = 4
	claudeEstimateBytesPerToken = 3
)

// estimateCounter counts ceil(len(text in bytes) / bytesPerToken).
type estimateCounter struct{ bytesPerToken int }

func (e estimateCounter) Count(text string) int {
	return (len(text) + e.bytesPerToken - 1) / e.bytesPerToken
}

func (estimateCounter) Exact() bool { return false }

func (e estimateCounter) Name() string {
	return fmt.Sprintf("estimate (%d bytes per token)", e.bytesPerToken)
}

// tiktokenCounter counts with one of tiktoken's encodings. The codec is built
// on first use (its vocabulary is a map of about 100k or 200k entries) and
// shared afterwards: counting only reads it, and the split regexp keeps its
// matching state in a pool, so one codec serves any number of goroutines.
//
// Byte-pair encoding costs about a microsecond a token, and the turn loop
// counts the same messages again before every model call of a long session,
// so counts of longer texts are remembered (see countCache).
type tiktokenCounter struct {
	name  string
	codec func() (tokenizer.Codec, error)
	cache countCache
}

func (t *tiktokenCounter) Count(text string) int {
	if text == "" {
		return 0
	}
	if n, ok := t.cache.get(text); ok {
		return n
	}
	c, err := t.codec()
	if err != nil {
		return defaultEstimate.Count(text)
	}
	n, err := c.Count(text)
	if err != nil {
		// The codec fails only when its split regexp fails (it has no
		// timeout set, and invalid UTF-8 is tokenized as bytes); fall
		// back to the estimate rather than report a context as empty.
		return defaultEstimate.Count(text)
	}
	t.cache.put(text, n)
	return n
}

// countCache remembers the token counts of texts of at least
// countCacheMinBytes, keyed by a 64-bit hash of the text and its length (two
// different texts sharing both is vanishingly unlikely, and would only skew
// an estimate of context size). It keeps two generations of at most
// countCacheEntries each: when the current one fills up it becomes the
// previous one and the older is dropped, so texts still in use survive and
// memory stays bounded (a few hundred kilobytes).
type countCache struct {
	mu        sync.Mutex
	seed      maphash.Seed
	cur, prev map[countKey]int
}

type countKey struct {
	hash uint64
	len  int
}

const (
	countCacheMinBytes = 256
	countCacheEntries  = 8192
)

func newCountCache() countCache {
	return countCache{seed: maphash.MakeSeed(), cur: make(map[countKey]int)}
}

func (c *countCache) key(text string) countKey {
	return countKey{hash: maphash.String(c.seed, text), len: len(text)}
}

func (c *countCache) get(text string) (int, bool) {
	if len(text) < countCacheMinBytes {
		return 0, false
	}
	k := c.key(text) // the seed never changes: hash outside the lock
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.cur[k]; ok {
		return n, true
	}
	if n, ok := c.prev[k]; ok {
		c.putLocked(k, n)
		return n, true
	}
	return 0, false
}

func (c *countCache) put(text string, n int) {
	if len(text) < countCacheMinBytes {
		return
	}
	k := c.key(text)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, n)
}

func (c *countCache) putLocked(k countKey, n int) {
	if len(c.cur) >= countCacheEntries {
		c.prev, c.cur = c.cur, make(map[countKey]int, countCacheEntries)
	}
	c.cur[k] = n
}

// Exact is true: the encodings are compiled into the tokenizer package, so
// loading one cannot fail for want of a file or a network (the tests prove
// both load). Were it ever to fail, Count falls back to the estimate and
// Exact says so.
func (t *tiktokenCounter) Exact() bool {
	_, err := t.codec()
	return err == nil
}

func (t *tiktokenCounter) Name() string { return t.name }

func newTiktokenCounter(enc tokenizer.Encoding) *tiktokenCounter {
	return &tiktokenCounter{
		name:  string(enc),
		cache: newCountCache(),
		codec: sync.OnceValues(func() (tokenizer.Codec, error) {
			c, err := tokenizer.Get(enc)
			if err != nil {
				return nil, fmt.Errorf("load tiktoken encoding %s: %w", enc, err)
			}
			return c, nil
		}),
	}
}

// The counters are package values so that each encoding loads at most once
// per process, whoever asks for it.
var (
	o200kCounter          = newTiktokenCounter(tokenizer.O200kBase)
	cl100kCounter         = newTiktokenCounter(tokenizer.Cl100kBase)
	defaultEstimate       = estimateCounter{estimateBytesPerToken}
	claudeEstimateCounter = estimateCounter{claudeEstimateBytesPerToken}
)

// o200kPrefixes and cl100kPrefixes name OpenAI's model families by the
// encoding their tokenizer uses (as tiktoken's model table does).
var (
	o200kPrefixes  = []string{"gpt-5", "gpt-4.1", "gpt-4.5", "gpt-4o", "chatgpt-4o", "o1", "o3", "o4", "codex-mini"}
	cl100kPrefixes = []string{"gpt-4", "gpt-3.5", "gpt-35"}
)

// CounterFor returns the tokenizer of a model:
//
//   - provider "openai": tiktoken's o200k_base for the gpt-5 family (gpt-5,
//     gpt-5-mini, ..., and gpt-5.1 to gpt-5.6), gpt-4.1, gpt-4.5, gpt-4o,
//     o1, o3, o4 and codex-mini; cl100k_base for gpt-4 (including
//     gpt-4-turbo) and gpt-3.5; an estimate of ceil(bytes/4) for any other
//     name (the GPT-6 family among them: the tokenizer library names no
//     encoding for it).
//   - provider "openai-compatible" serving a gpt-oss model (e.g.
//     "gpt-oss:20b", "openai/gpt-oss-120b"): o200k_base, whose tokens
//     gpt-oss's o200k_harmony shares (it only adds special tokens).
//   - provider "anthropic": an estimate of ceil(bytes/3) (see the estimate
//     rules above).
//   - anything else (local models, scripted, unknown providers): an estimate
//     of ceil(bytes/4), which overcounts English prose slightly and is safe
//     for a threshold.
//
// Names are matched after trimming spaces and lowering case. The returned
// Counter is safe for concurrent use; each encoding loads once per process,
// on its first Count.
func CounterFor(provider, name string) Counter {
	name = strings.ToLower(strings.TrimSpace(name))
	switch provider {
	case providerOpenAI:
		for _, p := range o200kPrefixes {
			if strings.HasPrefix(name, p) {
				return o200kCounter
			}
		}
		for _, p := range cl100kPrefixes {
			if strings.HasPrefix(name, p) {
				return cl100kCounter
			}
		}
	case providerOpenAICompatible:
		if strings.Contains(name, "gpt-oss") {
			return o200kCounter
		}
	case providerAnthropic:
		return claudeEstimateCounter
	}
	return defaultEstimate
}

// providerOpenAICompatible is the provider of any server that speaks OpenAI's
// Chat Completions API.
const providerOpenAICompatible = "openai-compatible"

// Overheads CountMessages adds to the text it counts. Providers wrap each
// message in a few tokens of markup (<|start|>role ... <|end|>): OpenAI's
// cookbook ("How to count tokens with tiktoken") counts each message's role
// and content plus 4 tokens for the first gpt-3.5-turbo and 3 for later
// models, and 3 tokens that prime the reply. CountMessages takes the larger
// 4, so it overcounts by at most one token a message. Tool calls and tool
// definitions are serialised by each provider into a format of its own that
// no public tokenizer reproduces exactly; the per-call and per-tool overheads
// below cover the wrapping (ids, type markers, braces) generously.
const (
	tokensPerMessage  = 4
	tokensReplyPrime  = 3
	tokensPerToolCall = 4
	tokensPerTool     = 8
)

// CountMessages estimates the tokens of a whole context: each message's
// text, tool calls (id, name and arguments), tool results (text and call id),
// readable reasoning text, plus a per-message overhead of 4 tokens and 3 for
// the reply priming (as OpenAI's cookbook counts), 4 per tool call, plus each
// tool's name, description and parameter schema (compacted JSON) and 8 per
// tool. Opaque reasoning (Anthropic signatures and redacted blocks, OpenAI
// encrypted content) is not counted: its size says little about the tokens
// it stands for. Providers drop reasoning of earlier turns from the input and
// count it only within the tool loop that produced it, so the count can miss
// that loop's reasoning; the input_tokens of the last response, where there is
// one, is the provider's own measure.
//
// The count is exact in its text parts when c is exact, and an estimate of the
// provider's framing either way; it only grows when a message, a tool call or
// a tool is added. A nil c counts with the 4-bytes-per-token estimate.
func CountMessages(c Counter, msgs []Message, tools []ToolDef) int {
	if c == nil {
		c = defaultEstimate
	}
	n := tokensReplyPrime
	for i := range msgs {
		n += MessageTokens(c, &msgs[i])
	}
	for i := range tools {
		t := &tools[i]
		n += tokensPerTool + c.Count(t.Name) + c.Count(t.Description) + c.Count(compactJSON(t.Parameters))
	}
	return n
}

// MessageTokens is what CountMessages counts for one message of a context
// (a nil c estimates): CountMessages(c, msgs, tools) is the reply's priming,
// the sum of MessageTokens over msgs and the tools' counts, so a caller that
// keeps a growing context may remember its messages' counts.
func MessageTokens(c Counter, m *Message) int {
	if c == nil {
		c = defaultEstimate
	}
	n := tokensPerMessage + c.Count(string(m.Role)) + c.Count(m.Text) + c.Count(m.CallID)
	for j := range m.ToolCalls {
		tc := &m.ToolCalls[j]
		n += tokensPerToolCall + c.Count(tc.ID) + c.Count(tc.Name) + c.Count(compactJSON(tc.Arguments))
	}
	if m.Reasoning != nil {
		n += c.Count(m.Reasoning.Text)
	}
	return n
}

// compactJSON returns raw without insignificant white space, as providers send
// arguments and schemas; raw that is not valid JSON is returned as it is.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if compact(raw) {
		// What Compact would give back: nothing to take out (and raw
		// that is not JSON is returned as it is anyway).
		return string(raw)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// compact reports whether raw holds no white space outside its strings:
// json.Compact would return it unchanged if it is JSON. The arguments the
// engine passes on are canonical JSON, compact already, and are counted at
// every model call of a turn.
func compact(raw []byte) bool {
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}
