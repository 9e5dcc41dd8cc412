package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// startedJournal is the journal the builder's started writes: a session
// whose turn t1 has one step with one idempotent call in flight.
const startedJournal = `{"seq":1,"type":"session.created","time":"1970-01-01T00:00:01Z","session_id":"ses_1","data":{"agent":{"name":"a","version":1},"input":"go"}}
{"seq":2,"type":"turn.created","time":"1970-01-01T00:00:02Z","session_id":"ses_1","turn_id":"t1","data":{"turn_id":"t1","index":1,"input":"go"}}
{"seq":3,"type":"turn.started","time":"1970-01-01T00:00:03Z","session_id":"ses_1","turn_id":"t1","data":{"turn_id":"t1"}}
{"seq":4,"type":"model.responded","time":"1970-01-01T00:00:04Z","session_id":"ses_1","turn_id":"t1","data":{"step":1,"tool_calls":[{"id":"c1","name":"shell"}],"usage":{"input_tokens":10,"output_tokens":2},"cost_usd":0.5}}
{"seq":5,"type":"tool.requested","time":"1970-01-01T00:00:05Z","session_id":"ses_1","turn_id":"t1","data":{"step":1,"index":0,"call_id":"c1","tool":"shell","kind":"builtin","effect":"idempotent"}}
{"seq":6,"type":"tool.started","time":"1970-01-01T00:00:06Z","session_id":"ses_1","turn_id":"t1","data":{"step":1,"index":0,"call_id":"c1","tool":"shell","effect_id":"e1","idempotency_key":"k1","effect":"idempotent","attempt":1}}
`

// FuzzApply feeds the projection journals (one JSON event per line, as
// `longhaul events --json` prints them): the first keep events of a real
// session's journal, then the fuzzer's own events. It may refuse an event,
// but never panics; and the events it accepts reproduce the state they
// built, however the state is rebuilt: replayed from scratch (a reader of
// the journal: checkJournal, exports), and resumed from the JSON of the
// state after a prefix (a worker that takes a session over loads the
// stored state and applies what follows). A field the state's JSON drops,
// or an Apply that depends on more than the state and the event, fails it.
//
// The real journals are in testdata/journals: sessions written by the
// engine running scripted agents (the engine's own tests, each journal
// copied as the store held it), which between them hold every kind of
// event a session's journal has. They are bases the input picks, not
// corpus entries: the fuzzer minimizes every input that finds new
// coverage by running it again with bytes removed, which takes minutes
// for a journal of kilobytes and leaves no time to fuzz, while a tail of a
// few events is minimized at once.
func FuzzApply(f *testing.F) {
	bases := testJournals(f)
	for i, b := range bases {
		f.Add(uint8(i), uint16(len(b)), []byte{})   // the whole session
		f.Add(uint8(i), uint16(len(b)/2), []byte{}) // a session cut mid-way
	}
	// Contradictions the projection refuses, after a call in flight.
	for _, tail := range []string{
		`{"type":"tool.completed","turn_id":"t1","data":{"step":1,"call_id":"c"}}`,
		`{"type":"turn.created","turn_id":"t1","data":{"turn_id":"t"}}` + "\n" + `{"type":"turn.completed","turn_id":"t1","data":{}}`,
		`{"type":"model.responded","turn_id":"t1","data":{"step":1,"tool_calls":[{"id":"c"}]}}` + "\n" + `{"type":"action.resolved","turn_id":"t1","data":{"action_id":"a"}}`,
		`{"type":"workspace.changed","turn_id":"t1","data":{"by":"person","op":"write","path":"a","sha256":"x","size":1}}` + "\n" +
			`{"type":"checkpoint.created","turn_id":"t1","data":{"checkpoint":{"id":"c","snapshot":"s"}}}`,
	} {
		f.Add(uint8(0), uint16(len(bases[0])), []byte(tail))
	}
	f.Fuzz(func(t *testing.T, base uint8, keep uint16, tail []byte) {
		b := bases[int(base)%len(bases)]
		events := renumber(append(slices.Clone(b[:min(int(keep), len(b))]), parseJournal(tail)...))
		requireReplayReproduces(t, events)
	})
}

// requireReplayReproduces applies events event by event, as the writer
// does, keeping the state's JSON after a few prefixes, then requires a
// replay from scratch, and resumes from each kept JSON, to end in the same
// JSON. The first refused event ends the journal: the writer persists
// nothing after one, so no journal holds it.
func requireReplayReproduces(t *testing.T, events []lt.Event) {
	t.Helper()
	var probe State
	n := 0
	for _, ev := range events {
		if Apply(&probe, ev, nil) != nil {
			break
		}
		n++
	}
	accepted := events[:n]

	var live State
	var ch Changes
	snapshots := map[int][]byte{}
	for k := 0; ; k++ {
		if cutAt(k, n) {
			snapshots[k] = mustMarshal(t, live)
		}
		if k == n {
			break
		}
		require.NoError(t, Apply(&live, accepted[k], &ch), "seq %d was accepted once", accepted[k].Seq)
	}
	want := snapshots[n]

	var replayed State
	for _, ev := range accepted {
		require.NoError(t, Apply(&replayed, ev, nil), "replay of seq %d", ev.Seq)
	}
	require.Equal(t, string(want), string(mustMarshal(t, replayed)), "a replay from scratch reproduces the state")

	for k, snap := range snapshots {
		var resumed State
		require.NoError(t, json.Unmarshal(snap, &resumed), "the state's JSON after %d events reads back", k)
		require.Equal(t, string(snap), string(mustMarshal(t, resumed)), "the state's JSON after %d events round-trips", k)
		for _, ev := range accepted[k:] {
			require.NoError(t, Apply(&resumed, ev, nil), "resumed after %d events: seq %d", k, ev.Seq)
		}
		require.Equal(t, string(want), string(mustMarshal(t, resumed)), "resumed from the state after %d events", k)
	}
}

// parseJournal reads one event per line; a line that is not an event is
// skipped.
func parseJournal(data []byte) []lt.Event {
	var out []lt.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev lt.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		ev.Data = json.RawMessage(validOr(ev.Data))
		out = append(out, ev)
	}
	return renumber(out)
}

// renumber gives events consecutive seqs from 1, as a store assigns them,
// and an event without a session the journal's first one.
func renumber(events []lt.Event) []lt.Event {
	for i := range events {
		events[i].Seq = int64(i + 1)
		if events[i].SessionID == "" && i > 0 {
			events[i].SessionID = events[0].SessionID
		}
	}
	return events
}

// cutAt reports whether a resume is checked from the state after k of n
// events: after none, every quarter and all. More would make an execution
// quadratic in the journal's length, and the fuzzer, which minimizes every
// new input it finds by running it again and again, would spend its time
// there.
func cutAt(k, n int) bool {
	return k == 0 || k == n || k == n/4 || k == n/2 || k == 3*n/4
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// TestSeedJournalsApplyWhole: every event of the seed journals is accepted,
// so the fuzzer starts from whole sessions, not from the prefix before a
// refusal; and startedJournal is what the builder's started writes.
func TestSeedJournalsApplyWhole(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "journals", "*.jsonl"))
	require.NoError(t, err)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		events := parseJournal(data)
		require.NotEmpty(t, events, p)
		var st State
		for _, ev := range events {
			require.NoError(t, Apply(&st, ev, nil), "%s: seq %d", p, ev.Seq)
		}
		require.Equal(t, events[len(events)-1].Seq, st.Session.LastEventSeq, p)
	}

	var st State
	for _, ev := range parseJournal([]byte(startedJournal)) {
		require.NoError(t, Apply(&st, ev, nil))
	}
	require.Equal(t, string(mustMarshal(t, started(t, lt.EffectIdempotent).st)), string(mustMarshal(t, st)))
}

// testJournals is startedJournal and every journal of testdata/journals,
// each as its events.
func testJournals(tb testing.TB) [][]lt.Event {
	bases := [][]lt.Event{parseJournal([]byte(startedJournal))}
	paths, err := filepath.Glob(filepath.Join("testdata", "journals", "*.jsonl"))
	require.NoError(tb, err)
	require.NotEmpty(tb, paths)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(tb, err)
		bases = append(bases, parseJournal(data))
	}
	return bases
}
