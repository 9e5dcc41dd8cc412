package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// streamTimeout bounds one raw stream connection of the test.
const streamTimeout = 60 * time.Second

// TestEventStreamResume follows one session's event stream the way a
// browser's EventSource does, with net/http and a parser of its own: it
// leaves mid-stream, resumes with Last-Event-ID, has the server SIGKILLed
// while the session waits for an application function and again while its
// steps run, resumes after each restart, and requires the collected events
// to be exactly the journal: seqs 1..N once each, the same types and the
// same data bytes. client.StreamEvents follows the same session across both
// restarts on its own and must collect the same journal.
func TestEventStreamResume(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	// A short ping interval, when the binary can be given one, puts ": ping"
	// comments between the frames the parser reads.
	help, err := binaryHelp()
	require.NoError(t, err)
	var args []string
	pings := strings.Contains(help, "--ping-interval")
	if pings {
		args = append(args, "--ping-interval", "50ms")
	}
	srv := startServer(t, args...)

	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Name: "stream", Script: streamScript(t)},
			Tools: []lt.ToolSpec{
				{Name: "write_file"}, {Name: "read_file"}, {Name: "list_files"},
				{Name: "approve_gate", Type: "function", Description: "Ask the application to open the gate",
					Parameters: json.RawMessage(`{"type":"object","properties":{"ticket":{"type":"string"}},"required":["ticket"]}`)},
			},
		},
		Input: "stream test",
	})
	require.NoError(t, err)
	id := sess.ID

	// The Go client follows the whole session in the background, across
	// both restarts.
	type streamed struct {
		events []lt.Event
		err    error
	}
	clientDone := make(chan streamed, 1)
	go func() {
		var res streamed
		for ev, err := range srv.api.StreamEvents(ctx, id, 0) {
			if err != nil {
				res.err = err
				break
			}
			res.events = append(res.events, ev)
			if statusTo(ev) == lt.SessionIdle {
				break
			}
		}
		clientDone <- res
	}()

	col := &collector{t: t}

	// A: from the start (no Last-Event-ID); leave after a few events.
	a := openStream(t, srv, id, -1)
	col.readUntil(a, func(lt.Event) bool { return len(col.events) >= 3 })
	a.close()

	// B: resume by Last-Event-ID; read until the session waits for the
	// application's function, then kill the server under the open stream.
	b := openStream(t, srv, id, col.last())
	col.readUntil(b, func(ev lt.Event) bool { return statusTo(ev) == lt.SessionRequiresAction })
	srv.kill()
	col.readToEnd(b)
	srv.restart()

	// C: resume after the restart; answer the function, read until the
	// step after it completed, and kill the server again while steps run.
	c := openStream(t, srv, id, col.last())
	actions, err := srv.api.ListActions(ctx, id, lt.ActionPending)
	require.NoError(t, err)
	require.Len(t, actions.Data, 1)
	require.Equal(t, lt.ActionFunctionCall, actions.Data[0].Type)
	_, err = srv.api.DecideAction(ctx, id, actions.Data[0].ID, &lt.Decision{Output: json.RawMessage(`{"open":true}`)})
	require.NoError(t, err)
	completed := 0
	col.readUntil(c, func(ev lt.Event) bool {
		if ev.Type == lt.EventToolCompleted {
			completed++ // the function's output, then the next step's tool
		}
		return completed == 2
	})
	srv.kill()
	col.readToEnd(c)
	srv.restart()
	mid, err := srv.api.GetSession(ctx, id)
	require.NoError(t, err)
	require.NotEqual(t, lt.SessionIdle, mid.Status, "the second kill must land before the session finished")

	// D: resume again and read to the end of the turn.
	d := openStream(t, srv, id, col.last())
	col.readUntil(d, func(ev lt.Event) bool { return statusTo(ev) == lt.SessionIdle })
	d.close()

	want := journal(ctx, t, srv.api, id)
	requireGapFree(t, id, want)
	requireSameEvents(t, want, col.events, "raw event stream")
	// The turn ends: its answer, its checkpoint, the session idle.
	require.Equal(t, lt.EventTurnCompleted, want[len(want)-3].Type)
	require.Equal(t, lt.EventCheckpointCreated, want[len(want)-2].Type)

	select {
	case res := <-clientDone:
		require.NoError(t, res.err, "client.StreamEvents")
		requireSameEvents(t, want, res.events, "client.StreamEvents")
	case <-time.After(streamTimeout):
		t.Fatalf("client.StreamEvents did not reach the end of the session within %s", streamTimeout)
	}

	if pings {
		require.Positive(t, col.pings, "the server was started with --ping-interval 50ms but sent no ping")
		t.Logf("stream: %d events, %d pings between frames", len(col.events), col.pings)
	} else {
		t.Logf("stream: %d events; the binary has no --ping-interval flag, so the ping framing sub-check did not run", len(col.events))
	}
	require.Zero(t, col.splitFrames, "a comment line arrived inside an event frame")
}

// streamScript has steps that take a while (delay_ms), a function call the
// session must wait on, and a final text.
func streamScript(t *testing.T) json.RawMessage {
	type call struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	type step struct {
		Text      string `json:"text,omitempty"`
		ToolCalls []call `json:"tool_calls,omitempty"`
		DelayMS   int    `json:"delay_ms,omitempty"`
	}
	steps := []step{
		{DelayMS: 80, ToolCalls: []call{{Name: "write_file", Arguments: map[string]any{"path": "notes.md", "content": "# notes\n"}}}},
		{DelayMS: 80, ToolCalls: []call{{Name: "list_files", Arguments: map[string]any{}}}},
		{ToolCalls: []call{{Name: "approve_gate", Arguments: map[string]any{"ticket": "OPS-1"}}}},
	}
	// After the gate: about 1.2 s of steps, so the second kill lands while
	// they run.
	for i := range 6 {
		c := call{Name: "read_file", Arguments: map[string]any{"path": "notes.md"}}
		if i%2 == 1 {
			c = call{Name: "write_file", Arguments: map[string]any{"path": fmt.Sprintf("part-%d.md", i), "content": strings.Repeat("line\n", i+1)}}
		}
		steps = append(steps, step{DelayMS: 200, ToolCalls: []call{c}})
	}
	steps = append(steps, step{DelayMS: 50, Text: "done"})
	raw, err := json.Marshal(steps)
	require.NoError(t, err)
	return raw
}

// statusTo returns the status a session.status_changed event moves to, or
// "" for any other event.
func statusTo(ev lt.Event) lt.SessionStatus {
	if ev.Type != lt.EventSessionStatusChanged {
		return ""
	}
	var d struct {
		To lt.SessionStatus `json:"to"`
	}
	if json.Unmarshal(ev.Data, &d) != nil {
		return ""
	}
	return d.To
}

// collector gathers the events of successive stream connections and
// checks, as they arrive, that they continue the sequence with no gap and
// no duplicate.
type collector struct {
	t           *testing.T
	events      []lt.Event
	pings       int
	splitFrames int
}

func (c *collector) last() int64 {
	if len(c.events) == 0 {
		return 0
	}
	return c.events[len(c.events)-1].Seq
}

// readUntil reads frames from s until stop reports true for an event.
func (c *collector) readUntil(s *rawStream, stop func(lt.Event) bool) {
	c.t.Helper()
	for {
		f, err := s.next()
		c.pings, c.splitFrames = c.pings+s.takePings(), c.splitFrames+s.takeSplit()
		require.NoError(c.t, err, "read the event stream after seq %d", c.last())
		ev := f.event(c.t)
		require.Equal(c.t, c.last()+1, ev.Seq, "stream event after seq %d", c.last())
		c.events = append(c.events, ev)
		if stop(ev) {
			return
		}
	}
}

// readToEnd collects what a stream still delivers after its server was
// killed (frames the server wrote before it died are valid events) and
// requires the stream then to end with an error rather than hang or
// deliver anything that does not continue the sequence.
func (c *collector) readToEnd(s *rawStream) {
	c.t.Helper()
	defer s.close()
	for {
		f, err := s.next()
		c.pings, c.splitFrames = c.pings+s.takePings(), c.splitFrames+s.takeSplit()
		if err != nil {
			require.NotErrorIs(c.t, err, context.DeadlineExceeded, "the stream stayed open after its server was killed")
			return
		}
		ev := f.event(c.t)
		require.Equal(c.t, c.last()+1, ev.Seq, "stream event after seq %d", c.last())
		c.events = append(c.events, ev)
	}
}

// rawStream is one GET .../events/stream connection, parsed by hand per the
// server-sent events format.
type rawStream struct {
	t      *testing.T
	cancel context.CancelFunc
	body   io.ReadCloser
	rd     *bufio.Reader
	pings  int
	split  int
}

// openStream connects to the session's stream. lastEventID < 0 sends no
// Last-Event-ID (the stream starts at the beginning).
func openStream(t *testing.T, srv *server, sessionID string, lastEventID int64) *rawStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), streamTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.url+"/v1/sessions/"+sessionID+"/events/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	// A transport of its own: a kept-alive connection to a killed server
	// must not be reused.
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("open event stream: %s: %s", resp.Status, body)
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "text/event-stream", mt)
	s := &rawStream{t: t, cancel: cancel, body: resp.Body, rd: bufio.NewReader(resp.Body)}
	t.Cleanup(s.close)
	return s
}

func (s *rawStream) close() {
	s.cancel()
	_ = s.body.Close()
}

func (s *rawStream) takePings() int {
	n := s.pings
	s.pings = 0
	return n
}

func (s *rawStream) takeSplit() int {
	n := s.split
	s.split = 0
	return n
}

// frame is one dispatched server-sent event.
type frame struct {
	id, typ, data string
	hasID         bool
}

// next returns the next event frame. Comment lines are counted (": ping")
// and skipped; a comment inside a frame is counted as a split frame, which
// the test forbids even though a browser would tolerate it.
func (s *rawStream) next() (frame, error) {
	var f frame
	var data []string
	fields := 0
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return f, fmt.Errorf("read stream: %w", err)
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if len(data) > 0 {
				f.data = strings.Join(data, "\n")
				return f, nil
			}
			f, fields = frame{}, 0 // a blank line after a comment, or an empty frame
		case strings.HasPrefix(line, ":"):
			if strings.TrimSpace(line[1:]) == "ping" {
				s.pings++
			}
			if fields > 0 {
				s.split++
			}
		default:
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			fields++
			switch name {
			case "id":
				f.id, f.hasID = value, true
			case "event":
				f.typ = value
			case "data":
				data = append(data, value)
			}
		}
	}
}

// event decodes a frame and checks that its id and event fields agree with
// the event it carries.
func (f frame) event(t *testing.T) lt.Event {
	t.Helper()
	var ev lt.Event
	require.NoError(t, json.Unmarshal([]byte(f.data), &ev), "frame data %q", f.data)
	require.True(t, f.hasID, "frame of seq %d has no id field", ev.Seq)
	require.Equal(t, strconv.FormatInt(ev.Seq, 10), f.id, "frame id vs seq")
	require.Equal(t, ev.Type, f.typ, "frame event field vs type of seq %d", ev.Seq)
	return ev
}
