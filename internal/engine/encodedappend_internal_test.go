package engine

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// encodedStore checks that every append the engine marks Encoded holds only
// valid JSON (the store no longer parses it), and counts the appends of each
// kind per session.
type encodedStore struct {
	store.Store
	tb      testing.TB
	mu      sync.Mutex
	encoded map[string]int
	checked map[string]int
}

func (s *encodedStore) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	if p.Encoded {
		valid := func(what string, doc json.RawMessage) {
			if len(doc) != 0 && !json.Valid(doc) {
				s.tb.Errorf("an encoded append of session %s: %s is not valid JSON: %q", p.SessionID, what, doc)
			}
		}
		valid("state", p.State)
		for _, ev := range p.Events {
			valid(ev.Type, ev.Data)
		}
		for _, d := range p.Docs {
			valid(string(d.Kind)+" "+d.ID, d.Doc)
		}
	}
	s.mu.Lock()
	if p.Encoded {
		s.encoded[p.SessionID]++
	} else {
		s.checked[p.SessionID]++
	}
	s.mu.Unlock()
	return s.Store.EventAppend(ctx, p)
}

func (s *encodedStore) counts(id string) (encoded, checked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.encoded[id], s.checked[id]
}

// secretVault redacts one secret's value from everything journaled.
type secretVault struct {
	Vault
	r *redact.Redactor
}

func (v secretVault) Redactor(context.Context) (*redact.Redactor, error) { return v.r, nil }

// TestAppendsEncodedByTheEngine: a session's appends (its steps with tool
// calls and checkpoints, its turns' ends, a new turn from the API) are
// marked Encoded and hold only valid JSON; a batch holding an event put in
// it other than by add (a batch carried over a conflict, whose data may be
// rewritten) or a payload the redactor rewrote is not: the store checks it.
func TestAppendsEncodedByTheEngine(t *testing.T) {
	ctx := context.Background()
	var es *encodedStore
	const perTurn = 4
	e := startStepsEngine(t, perTurn, func(st store.Store) store.Store {
		es = &encodedStore{Store: st, tb: t, encoded: map[string]int{}, checked: map[string]int{}}
		return es
	}, func(cfg *Config) {
		cfg.Vault = secretVault{r: redact.New(map[string]string{"TOKEN": "s3cr3t-t0ken-value"})}
	})

	id := parkedSession(t, e, perTurn, 2)
	encoded, checked := es.counts(id)
	require.Zero(t, checked, "appends of the session the store had to check")
	require.GreaterOrEqual(t, encoded, 2*perTurn, "encoded appends")

	_, state, err := e.loadState(ctx, id)
	require.NoError(t, err)
	b := e.newBatch(ctx, state, "")
	require.NoError(t, b.add(lt.EventSignalReceived, "", 0, lt.SignalReceivedData{ID: "sig_1", Name: "go", Payload: json.RawMessage(` {"a": [1, 2]} `)}))
	p, err := b.appendParams(state.Session.LastEventSeq-1, nil, false)
	require.NoError(t, err)
	require.True(t, p.Encoded)
	require.JSONEq(t, `{"id":"sig_1","name":"go","payload":{"a":[1,2]}}`, string(p.Events[0].Data))

	carried := b.events[0]
	carried.Seq++
	b.events = append(b.events, carried)
	p, err = b.appendParams(state.Session.LastEventSeq-2, nil, false)
	require.NoError(t, err)
	require.False(t, p.Encoded, "a batch with an event not encoded by add")

	b = e.newBatch(ctx, state, "")
	require.NoError(t, b.add(lt.EventSignalReceived, "", 0, lt.SignalReceivedData{ID: "sig_2", Name: "go", Payload: json.RawMessage(`{"token":"s3cr3t-t0ken-value"}`)}))
	p, err = b.appendParams(state.Session.LastEventSeq-1, nil, false)
	require.NoError(t, err)
	require.NotContains(t, string(p.Events[0].Data), "s3cr3t", "the payload was redacted")
	require.False(t, p.Encoded, "a batch with a payload the redactor rewrote")
}
