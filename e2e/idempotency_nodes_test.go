package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The size of the idempotency race: idemRounds keys, each sent by
// idemPerNode clients to each of the two nodes at once. Several clients per
// node, so that a key meets both this node's own run (the clients wait and
// replay it) and the other node's claim (a 409).
const (
	idemRounds  = 20
	idemPerNode = 4
	// idemLeaseTTL is the nodes' lease TTL: no node dies in this test,
	// so it only has to be renewed in time on two loaded cores.
	idemLeaseTTL = 10 * time.Second
	// idemRetryTimeout bounds a retry's wait for a claim to end: the
	// claims of this test end when their runs record their responses, in
	// milliseconds; a claim left behind would expire only after the
	// server's claim TTL (30 s), which this bound does not cover.
	idemRetryTimeout = 20 * time.Second
	// idemListPage is the sessions list's page size: smaller than
	// idemRounds, so that the listing follows its cursor.
	idemListPage = 7
)

// TestIdempotencyKeyAcrossNodes sends the same POST /v1/sessions, with the
// same Idempotency-Key and body, to two nodes sharing one PostgreSQL store
// at the same moment, for idemRounds keys. A key runs on one node at a
// time: every answer is a 201 naming one session or a 409 conflict with a
// Retry-After (the other node's run holds the key), exactly one answer per
// key is not a replay, the sessions list holds exactly one session per key
// (before the key was claimed in the store, both nodes ran the request and
// two sessions ran their agents), and a retry of each key on either node
// replays that session.
func TestIdempotencyKeyAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.FreshSchema(t)
	c := startCluster(t, dsn, 2, idemLeaseTTL)
	// Raw requests, one client per node: the Go client retries a 409 by
	// itself and sends its own keys, and each raw answer is what is
	// asserted here. The nodes' transports keep their connections open
	// from one round to the next, so a round's requests leave together.
	clients := make([]*http.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = &http.Client{Transport: n.transport, Timeout: 30 * time.Second}
	}

	created := map[string]string{} // key -> the session its 201s name
	conflicts, raced := 0, 0
	for round := range idemRounds {
		key := fmt.Sprintf("idem-nodes-%02d", round)
		body := idemSessionBody(t, key)

		// Every client waits for the start's close, then sends at once.
		start := make(chan struct{})
		answers := make([]idemAnswer, len(c.nodes)*idemPerNode)
		errs := make([]error, len(answers))
		var wg sync.WaitGroup
		for i := range answers {
			node := i % len(c.nodes)
			wg.Go(func() {
				<-start
				answers[i], errs[i] = idemPost(ctx, clients[node], c.nodes[node], key, body)
				answers[i].node = node
			})
		}
		close(start)
		wg.Wait()

		fresh := 0
		nodes201 := map[int]bool{}
		for i, a := range answers {
			require.NoError(t, errs[i], "key %s: request %d", key, i)
			switch a.status {
			case http.StatusCreated:
				require.NotEmpty(t, a.session.ID, "key %s: a 201 of node %d names no session: %s", key, a.node, a.body)
				if id, ok := created[key]; ok {
					require.Equal(t, id, a.session.ID, "key %s: node %d's 201 names another session: two were created", key, a.node)
				}
				created[key] = a.session.ID
				if a.replayed != "true" {
					fresh++
				}
				nodes201[a.node] = true
			case http.StatusConflict:
				// The other node runs the key: retry later, as the
				// header says; never a second run.
				require.Equal(t, lt.CodeConflict, a.err.Code, "key %s: node %d: %s", key, a.node, a.body)
				require.Contains(t, a.err.Message, "is running", "key %s: node %d's 409 is not the claim's: %s", key, a.node, a.body)
				secs, err := strconv.Atoi(a.retryAfter)
				require.NoError(t, err, "key %s: node %d's 409 has no Retry-After in seconds: %q", key, a.node, a.retryAfter)
				require.Positive(t, secs, "key %s: node %d's Retry-After", key, a.node)
				conflicts++
			default:
				t.Fatalf("key %s: node %d answered %d, neither 201 nor 409: %s", key, a.node, a.status, a.body)
			}
		}
		// One run answered without replaying; every other 201 replayed its
		// record. A 201 that ran the request again would not say replayed.
		require.Equal(t, 1, fresh, "key %s: answers that ran the request (not replayed): %d", key, fresh)
		if len(nodes201) == len(c.nodes) {
			raced++
		}
	}

	// From the outside: one session per key, the one its 201s named.
	idemRequireOneSessionPerKey(ctx, t, c.nodes[0].api, created)

	// A retry of each key on either node finds the record: a 201 replaying
	// the same session (a 409 while a claim is still held is waited out).
	for key, id := range created {
		body := idemSessionBody(t, key)
		for node := range c.nodes {
			var a idemAnswer
			waitFor(t, idemRetryTimeout, "the retry of "+key+" on node "+strconv.Itoa(node)+" to be answered", func() (bool, error) {
				var err error
				a, err = idemPost(ctx, clients[node], c.nodes[node], key, body)
				return err == nil && a.status != http.StatusConflict, err
			})
			require.Equal(t, http.StatusCreated, a.status, "retry of %s on node %d: %s", key, node, a.body)
			require.Equal(t, id, a.session.ID, "retry of %s on node %d names another session", key, node)
			require.Equal(t, "true", a.replayed, "retry of %s on node %d ran the request again", key, node)
		}
	}
	idemRequireOneSessionPerKey(ctx, t, c.nodes[1].api, created)
	t.Logf("idempotency across nodes: %d keys, %d requests each (%d per node at once); %d answered 409 (the other node's claim); "+
		"in %d rounds both nodes answered 201 (one ran, the other replayed); one session per key",
		idemRounds, len(c.nodes)*idemPerNode, idemPerNode, conflicts, raced)
}

// idemSessionBody is the body of the POST /v1/sessions sent with key: an
// offline scripted agent, and the key in the session's metadata, so that
// the sessions list tells which key made each session.
func idemSessionBody(t *testing.T, key string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"agent_spec": map[string]any{
			"model": map[string]any{"provider": "scripted", "name": "idem", "script": []any{map[string]any{"text": "done: " + key}}},
		},
		"input":    "create once: " + key,
		"metadata": map[string]any{"idempotency_key": key},
	})
	require.NoError(t, err)
	return b
}

// idemAnswer is one raw answer to a POST with an Idempotency-Key.
type idemAnswer struct {
	node       int
	status     int
	retryAfter string // the Retry-After header
	replayed   string // the Idempotent-Replayed header
	body       []byte
	session    lt.Session // the body of a 201
	err        lt.Error   // the body of an error
}

// idemPost sends body to node's POST /v1/sessions with key, once. It
// returns errors rather than failing the test, as it runs in the racing
// goroutines.
func idemPost(ctx context.Context, hc *http.Client, node *server, key string, body []byte) (idemAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, node.url+"/v1/sessions", bytes.NewReader(body))
	if err != nil {
		return idemAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := hc.Do(req)
	if err != nil {
		return idemAnswer{}, fmt.Errorf("POST /v1/sessions to %s: %w", node.addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return idemAnswer{}, fmt.Errorf("read the answer of %s: %w", node.addr, err)
	}
	a := idemAnswer{
		status:     resp.StatusCode,
		retryAfter: resp.Header.Get("Retry-After"),
		replayed:   resp.Header.Get("Idempotent-Replayed"),
		body:       data,
	}
	if resp.StatusCode == http.StatusCreated {
		if err := json.Unmarshal(data, &a.session); err != nil {
			return a, fmt.Errorf("decode the 201 of %s: %w: %s", node.addr, err, data)
		}
		return a, nil
	}
	var e lt.ErrorResponse
	if err := json.Unmarshal(data, &e); err != nil {
		return a, fmt.Errorf("decode the %d of %s: %w: %s", resp.StatusCode, node.addr, err, data)
	}
	a.err = e.Error
	return a, nil
}

// idemRequireOneSessionPerKey lists every session, page by page, and
// requires exactly one per key of created: the one its answers named.
func idemRequireOneSessionPerKey(ctx context.Context, t *testing.T, api *client.Client, created map[string]string) {
	t.Helper()
	byKey := map[string][]string{}
	total := 0
	for cursor := ""; ; {
		l, err := api.ListSessions(ctx, client.ListSessionsParams{Cursor: cursor, Limit: idemListPage})
		require.NoError(t, err)
		for _, s := range l.Data {
			var meta struct {
				Key string `json:"idempotency_key"`
			}
			require.NoError(t, json.Unmarshal(s.Metadata, &meta), "metadata of %s: %s", s.ID, s.Metadata)
			byKey[meta.Key] = append(byKey[meta.Key], s.ID)
			total++
		}
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	var twice []string
	for key, ids := range byKey {
		if len(ids) > 1 {
			twice = append(twice, fmt.Sprintf("%s: %s", key, strings.Join(ids, ", ")))
		}
	}
	slices.Sort(twice)
	require.Empty(t, twice, "%d of %d keys created more than one session", len(twice), len(created))
	require.Equal(t, len(created), total, "sessions listed")
	for key, id := range created {
		require.Equal(t, []string{id}, byKey[key], "the sessions of key %s", key)
	}
}
