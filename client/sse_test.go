package client

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
)

// readAll returns every message of the stream and the final retry value.
func readAll(t testing.TB, r io.Reader) ([]sseEvent, time.Duration, error) {
	rd := newSSEReader(r)
	var out []sseEvent
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, rd.retry, nil
		}
		if err != nil {
			return out, rd.retry, err
		}
		out = append(out, ev)
	}
}

var sseCases = []struct {
	name  string
	in    string
	want  []sseEvent
	retry time.Duration
}{
	{
		name: "one event",
		in:   "id: 42\nevent: tool.completed\ndata: {\"seq\":42}\n\n",
		want: []sseEvent{{ID: "42", Event: "tool.completed", Data: `{"seq":42}`}},
	},
	{
		name: "multi-line data is joined with LF",
		in:   "data: {\ndata:  \"a\": 1\ndata: }\n\n",
		want: []sseEvent{{Event: "message", Data: "{\n \"a\": 1\n}"}},
	},
	{
		name: "comments and pings are ignored",
		in:   ": ping\n\n:\ndata: x\n: in the middle\n\n: ping\n\n",
		want: []sseEvent{{Event: "message", Data: "x"}},
	},
	{
		name: "CRLF, CR and LF line ends",
		in:   "id: 1\r\ndata: a\r\n\r\nid: 2\rdata: b\r\rid: 3\ndata: c\n\n",
		want: []sseEvent{
			{ID: "1", Event: "message", Data: "a"},
			{ID: "2", Event: "message", Data: "b"},
			{ID: "3", Event: "message", Data: "c"},
		},
	},
	{
		name: "one leading space is removed, no more",
		in:   "data:x\n\ndata:  y\n\n",
		want: []sseEvent{{Event: "message", Data: "x"}, {Event: "message", Data: " y"}},
	},
	{
		name: "a field without colon has an empty value",
		in:   "data\n\ndata\ndata\n\n",
		want: []sseEvent{{Event: "message", Data: ""}, {Event: "message", Data: "\n"}},
	},
	{
		name: "no data, no dispatch, and the type does not leak",
		in:   "event: ignored\n\ndata: y\n\n",
		want: []sseEvent{{Event: "message", Data: "y"}},
	},
	{
		name: "the last event id persists and can be reset",
		in:   "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n",
		want: []sseEvent{
			{ID: "7", Event: "message", Data: "a"},
			{ID: "7", Event: "message", Data: "b"},
			{ID: "", Event: "message", Data: "c"},
		},
	},
	{
		name: "an id with NUL is ignored",
		in:   "id: 5\ndata: a\n\nid: 6\x00\ndata: b\n\n",
		want: []sseEvent{{ID: "5", Event: "message", Data: "a"}, {ID: "5", Event: "message", Data: "b"}},
	},
	{
		name:  "retry takes digits only",
		in:    "retry: 1500\ndata: a\n\nretry: 2.5\nretry: x\n\n",
		want:  []sseEvent{{Event: "message", Data: "a"}},
		retry: 1500 * time.Millisecond,
	},
	{
		name: "a leading BOM is stripped",
		in:   "\uFEFFdata: a\n\n",
		want: []sseEvent{{Event: "message", Data: "a"}},
	},
	{
		name: "unknown fields are ignored",
		in:   "foo: bar\ndata: a\nData: B\n\n",
		want: []sseEvent{{Event: "message", Data: "a"}},
	},
	{
		name: "an event cut off before its blank line is discarded",
		in:   "data: a\n\nid: 2\ndata: {\"seq\":",
		want: []sseEvent{{Event: "message", Data: "a"}},
	},
	{
		name: "a cut after the last data line is discarded too",
		in:   "data: a\n\nid: 2\ndata: b\n",
		want: []sseEvent{{Event: "message", Data: "a"}},
	},
	{
		name: "empty stream",
		in:   "",
	},
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	for _, tt := range sseCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, chunked := range []bool{false, true} {
				var r io.Reader = strings.NewReader(tt.in)
				if chunked {
					r = iotest.OneByteReader(r)
				}
				got, retry, err := readAll(t, r)
				require.NoError(t, err)
				require.Equal(t, tt.want, got, "one byte at a time: %v", chunked)
				require.Equal(t, tt.retry, retry)
			}
		})
	}
}

func TestSSEReaderDispatchesOnLoneCRWithoutWaiting(t *testing.T) {
	t.Parallel()
	// A server ending lines with CR must get its event delivered as soon
	// as the closing CR arrives, not when the next byte does.
	pr, pw := io.Pipe()
	rd := newSSEReader(pr)
	type result struct {
		ev  sseEvent
		err error
	}
	next := func() <-chan result {
		ch := make(chan result, 1)
		go func() {
			ev, err := rd.Next()
			ch <- result{ev, err}
		}()
		return ch
	}

	ch := next()
	_, err := pw.Write([]byte("data: x\r\r"))
	require.NoError(t, err)
	res := <-ch
	require.NoError(t, res.err)
	require.Equal(t, "x", res.ev.Data)

	// The LF that completes that CRLF must not count as a blank line.
	ch = next()
	_, err = pw.Write([]byte("\ndata: y\r\n\r\n"))
	require.NoError(t, err)
	res = <-ch
	require.NoError(t, res.err)
	require.Equal(t, "y", res.ev.Data)

	require.NoError(t, pw.Close())
	res = <-next()
	require.ErrorIs(t, res.err, io.EOF)
}

func TestSSEReaderPropagatesReadErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
	got, _, err := readAll(t, r)
	require.ErrorIs(t, err, boom)
	require.Equal(t, []sseEvent{{Event: "message", Data: "a"}}, got)
}

// FuzzSSEReader checks that parsing never fails on any input and does not
// depend on how the bytes are split into reads.
func FuzzSSEReader(f *testing.F) {
	for _, tt := range sseCases {
		f.Add(tt.in)
	}
	f.Add("data: a\r")
	f.Add("\r\n\r\n\r\r\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		whole, retryWhole, err := readAll(t, strings.NewReader(in))
		if err != nil {
			t.Fatalf("whole: %v", err)
		}
		bytewise, retryBytewise, err := readAll(t, iotest.OneByteReader(strings.NewReader(in)))
		if err != nil {
			t.Fatalf("one byte at a time: %v", err)
		}
		require.Equal(t, whole, bytewise)
		require.Equal(t, retryWhole, retryBytewise)
		for _, ev := range whole {
			require.NotEmpty(t, ev.Event)
			require.NotContains(t, ev.ID, "\x00")
		}
	})
}
