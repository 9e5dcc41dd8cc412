package server_test

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// update rewrites the golden files from what the tests produce:
//
//	go test ./internal/server -run TestGolden -update
//
// Review the diff before committing it: a golden file is the wire format
// clients depend on, so a change to one is a change of the API.
var update = flag.Bool("update", false, "rewrite testdata/*.golden from the output of the tests")

// requireGolden compares got with testdata/name byte for byte (or writes
// it, with -update).
func requireGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run the test with -update to create %s", path)
	require.Equal(t, string(want), string(got), "%s: the bytes on the wire changed (if on purpose: -update, and review the diff)", path)
}

// goldenTime is every event's time in the engine-driven golden streams.
var goldenTime = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

// fixedClock stands still at goldenTime, so the journal's times (and the
// durations measured on the clock: 0) are the same on every run; waits
// still take real time, so the engine's loops go on.
type fixedClock struct{}

func (fixedClock) Now() time.Time                         { return goldenTime }
func (fixedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// generatedID matches the ids the engine draws at random (a ULID after
// ses_, turn_, …: 26 characters of Crockford base32) or derives from them
// (a 32-hex hash after eff_, lhk_, act_, …; after ckpt_, the session's own
// id followed by 12 digits), and the node id it draws when none is
// configured (node- and 16 hex).
var generatedID = regexp.MustCompile(`\b([a-z]+_)((?:[0-9a-hjkmnp-tv-z]{26}|[0-9a-f]{32})(?:[0-9]{12})?)\b|\b(node-)[0-9a-f]{16}\b`)

// normalizeIDs replaces each generated id with its prefix and the order of
// its first appearance (ses_1, turn_1, eff_1, …; one id is the same name
// everywhere), the only bytes of a stream that differ between runs. Nothing
// else is touched: the frames' structure, field order, escaping and every
// other byte are compared exactly.
func normalizeIDs(b []byte) []byte {
	names := map[string]string{}
	count := map[string]int{}
	return generatedID.ReplaceAllFunc(b, func(id []byte) []byte {
		if n, ok := names[string(id)]; ok {
			return []byte(n)
		}
		m := generatedID.FindSubmatch(id)
		prefix := string(m[1])
		if prefix == "" {
			prefix = string(m[3])
		}
		count[prefix]++
		n := prefix + strconv.Itoa(count[prefix])
		names[string(id)] = n
		return []byte(n)
	})
}

// recordStream makes everything s reads from now on also go to a buffer,
// byte for byte, after the response's status and headers (but Date, and
// the value of X-Request-Id).
func recordStream(s *sseStream) *bytes.Buffer {
	var raw bytes.Buffer
	fmt.Fprintf(&raw, "HTTP %d\n", s.res.StatusCode)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range s.res.Header {
			if k != "Date" && !yield(k) {
				return
			}
		}
	}) {
		v := strings.Join(s.res.Header.Values(k), ", ")
		if k == "X-Request-Id" {
			v = "(random)" // drawn per request; its presence is the contract
		}
		fmt.Fprintf(&raw, "%s: %s\n", k, v)
	}
	raw.WriteString("\n")
	s.rd = bufio.NewReader(io.TeeReader(s.res.Body, &raw))
	return &raw
}

// readAndPing reads n events, then a ping (the test's ticker fires).
func readAndPing(t *testing.T, s *sseStream, n int, tickers *pingTickers) {
	t.Helper()
	for range n {
		s.nextEvent()
	}
	requirePing(t, s, tickers)
}

// requirePing fires the ticker of the stream opened last (s, which has
// written its first frames, so its ticker exists) and reads the ping.
func requirePing(t *testing.T, s *sseStream, tickers *pingTickers) {
	t.Helper()
	tickers.last() <- time.Time{}
	f, err := s.next()
	require.NoError(t, err)
	require.Equal(t, "ping", f.comment)
}

// requireEnd shuts the server down and reads the stream to its end, which
// must come with nothing more.
func requireEnd(t *testing.T, h *harness, s *sseStream) {
	t.Helper()
	h.srv.Shutdown()
	_, err := s.next()
	require.True(t, errors.Is(err, io.EOF), "the stream ends after a shutdown, with nothing more: %v", err)
}

// pingTickers gives each stream a ping ticker of its own, which the test
// fires: a tick meant for one stream cannot be taken by an earlier one
// whose handler has not yet seen its client leave.
type pingTickers struct {
	mu    sync.Mutex
	ticks []chan time.Time
}

func (p *pingTickers) ticker(time.Duration) (<-chan time.Time, func()) {
	c := make(chan time.Time)
	p.mu.Lock()
	p.ticks = append(p.ticks, c)
	p.mu.Unlock()
	return c, func() {}
}

// last is the ticker of the stream that started last.
func (p *pingTickers) last() chan<- time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ticks[len(p.ticks)-1]
}

// TestGoldenEventStream holds the exact bytes of a session's event stream:
// a scripted session run by the real engine (a file written, an artifact
// delivered, the turn completed), streamed from the start with a ping and
// ended by a shutdown; then resumed with Last-Event-ID. Ids are normalized
// (normalizeIDs); times are the fixed clock's.
func TestGoldenEventStream(t *testing.T) {
	t.Parallel()
	tickers := &pingTickers{}
	h := newHarness(t, harnessOpts{clock: fixedClock{}, ticker: tickers.ticker})
	sess := h.createSession("golden")
	h.waitStatus(sess.ID, lt.SessionIdle)
	n := len(h.allEvents(sess.ID, 500))

	var out bytes.Buffer
	out.WriteString("# GET /v1/sessions/{id}/events/stream\n")
	full := h.openStream(sess.ID, "", nil)
	raw := recordStream(full)
	readAndPing(t, full, n, tickers)
	full.close()
	out.Write(raw.Bytes())

	out.WriteString("# GET /v1/sessions/{id}/events/stream with Last-Event-ID: " + strconv.Itoa(n-2) + "\n")
	resumed := h.openStream(sess.ID, "", map[string]string{"Last-Event-ID": strconv.Itoa(n - 2)})
	raw = recordStream(resumed)
	readAndPing(t, resumed, 2, tickers)
	requireEnd(t, h, resumed)
	out.Write(raw.Bytes())

	requireGolden(t, "event_stream.golden", normalizeIDs(out.Bytes()))
}

// TestGoldenTreeStream holds the exact bytes of a tree stream
// (?include=subagents): a root, two children and a grandchild, with their
// events, each frame's id the tree cursor after it; streamed from the
// start with a ping, then resumed from a cursor mid-way after more events
// and a new child. The backend's ids and times are fixed.
func TestGoldenTreeStream(t *testing.T) {
	t.Parallel()
	b := newTreeBackend()
	root := b.create("")
	c1 := b.create(root)
	c2 := b.create(root)
	g1 := b.create(c1)
	b.emit(root, 2)
	b.emit(c1, 1)
	b.emit(c2, 2)
	b.emit(g1, 1)
	tickers := &pingTickers{}
	h := newTreeHarness(t, b, tickers.ticker)

	var out bytes.Buffer
	out.WriteString("# GET /v1/sessions/" + root + "/events/stream?include=subagents\n")
	full := h.openStream(root, "?include=subagents", nil)
	raw := recordStream(full)
	tr := newTreeReader(t, full, nil)
	tr.readAll(b)
	var cut string
	n := tr.frames
	requirePing(t, full, tickers)
	full.close()
	out.Write(raw.Bytes())

	// The cursor after the sixth frame, read back from the recording.
	for _, line := range strings.Split(raw.String(), "\n") {
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			if n--; n == tr.frames-6 {
				cut = id
			}
		}
	}
	require.NotEmpty(t, cut)
	b.emit(root, 1)
	c3 := b.create(root)
	b.emit(c3, 1)
	b.emit(g1, 1)

	out.WriteString("# GET /v1/sessions/" + root + "/events/stream?include=subagents with Last-Event-ID: " + cut + "\n")
	resumed := h.openStream(root, "?include=subagents", map[string]string{"Last-Event-ID": cut})
	raw = recordStream(resumed)
	start, err := lt.ParseTreeCursor(cut)
	require.NoError(t, err)
	rt := newTreeReader(t, resumed, start)
	rt.readAll(b)
	requirePing(t, resumed, tickers)
	requireEnd(t, h, resumed)
	out.Write(raw.Bytes())

	requireGolden(t, "tree_stream.golden", out.Bytes())
}
