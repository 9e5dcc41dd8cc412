package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// These tests hold the signatures to the Standard Webhooks reference Go
// library, the code receivers actually run: what it refuses, a receiver
// refuses, whatever this package's own Verify says.

// libHeaders are the headers the library reads.
func libHeaders(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	return h
}

func libWebhook(t *testing.T, secret string) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	return wh
}

// The specification's published vector, checked by the reference library:
// it signs the vector to the published signature, as Sign does, and
// accepts it. Verify also checks the timestamp's age (the vector is from
// 2021), so the same message signed now passes the full Verify, and any
// change to id, timestamp or body fails it.
func TestReferenceLibraryVerifiesTheSpecificationVector(t *testing.T) {
	wh := libWebhook(t, vectorSecret)
	payload := []byte(vectorPayload)

	libSig, err := wh.Sign(vectorID, time.Unix(vectorTimestamp, 0), payload)
	require.NoError(t, err)
	require.Equal(t, vectorSignature, libSig)
	ours, err := Sign([]string{vectorSecret}, vectorID, vectorTimestamp, payload)
	require.NoError(t, err)
	require.Equal(t, libSig, ours)

	vector := libHeaders(vectorID, vectorTimestamp, vectorSignature)
	require.NoError(t, wh.VerifyIgnoringTimestamp(payload, vector))
	require.ErrorIs(t, wh.Verify(payload, vector), standardwebhooks.ErrMessageTooOld)

	now := time.Now().Unix()
	sig, err := Sign([]string{vectorSecret}, vectorID, now, payload)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(payload, libHeaders(vectorID, now, sig)))

	for name, tc := range map[string]struct {
		id   string
		ts   int64
		body string
	}{
		"another id":        {id: "msg_other", ts: now, body: vectorPayload},
		"another timestamp": {id: vectorID, ts: now - 1, body: vectorPayload},
		"another body":      {id: vectorID, ts: now, body: `{"test": 2432232315}`},
	} {
		err := wh.Verify([]byte(tc.body), libHeaders(tc.id, tc.ts, sig))
		require.ErrorIs(t, err, standardwebhooks.ErrNoMatchingSignature, name)
	}
	require.ErrorIs(t, libWebhook(t, NewSecret()).Verify(payload, libHeaders(vectorID, now, sig)),
		standardwebhooks.ErrNoMatchingSignature, "another secret")
}

// During a rotation a request carries one signature per secret: the
// library, given either secret, finds its own; given another, none.
func TestReferenceLibraryVerifiesEverySecretOfARotation(t *testing.T) {
	next := NewSecret()
	payload := []byte(vectorPayload)
	now := time.Now().Unix()
	sig, err := Sign([]string{next, vectorSecret}, vectorID, now, payload)
	require.NoError(t, err)
	h := libHeaders(vectorID, now, sig)
	require.NoError(t, libWebhook(t, next).Verify(payload, h))
	require.NoError(t, libWebhook(t, vectorSecret).Verify(payload, h))
	require.ErrorIs(t, libWebhook(t, NewSecret()).Verify(payload, h), standardwebhooks.ErrNoMatchingSignature)
}

// libVerifier returns a receiver's check: every secret *secrets holds must
// verify the request with the reference library (full Verify, timestamp
// included), and a stranger's secret must not.
func libVerifier(secrets *atomic.Pointer[[]string]) func(http.Header, []byte) error {
	stranger, _ := standardwebhooks.NewWebhook(NewSecret()) // a valid secret cannot fail
	return func(h http.Header, body []byte) error {
		list := secrets.Load()
		if list == nil || len(*list) == 0 {
			return errors.New("the receiver has no secret yet")
		}
		for i, s := range *list {
			wh, err := standardwebhooks.NewWebhook(s)
			if err != nil {
				return fmt.Errorf("secrets[%d]: %w", i, err)
			}
			if err := wh.Verify(body, h); err != nil {
				return fmt.Errorf("secrets[%d]: %w", i, err)
			}
		}
		if err := stranger.Verify(body, h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			return fmt.Errorf("a stranger's secret: want no matching signature, got %v", err)
		}
		return nil
	}
}

// Real requests of the dispatcher — to a session's webhook_url and to an
// endpoint whose secret is being rotated (two secrets) — are verified by
// receivers that run the reference library on every request, retries
// (signed again with a fresh timestamp) included.
func TestReferenceLibraryVerifiesDispatchedRequests(t *testing.T) {
	// The library checks the timestamp against the real time, so the
	// fake clock starts now.
	e := newEnvAt(t, time.Now().UTC().Truncate(time.Second))
	var sessionSecrets, endpointSecrets atomic.Pointer[[]string]
	sessionRecv := startReceiver(t, nil, libVerifier(&sessionSecrets))
	endpointRecv := startReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // one retry
		}
	}, libVerifier(&endpointSecrets))

	e.createSession("s1", sessionRecv.srv.URL+"/hook")
	d, _ := e.start(Config{AllowPrivate: []string{"127.0.0.1"}, Ports: []int{sessionRecv.port(t), endpointRecv.port(t)}})
	secret, err := d.SessionSecret(t.Context(), "s1")
	require.NoError(t, err)
	sessionSecrets.Store(&[]string{secret})
	rotating := []string{NewSecret(), NewSecret()} // the new one first, the old one still accepted
	endpointSecrets.Store(&rotating)
	require.NoError(t, e.st.WebhookEndpointCreate(t.Context(), &store.WebhookEndpointRow{
		Project: lt.DefaultProject, ID: "whe_rotating", URL: endpointRecv.srv.URL, Events: []string{}, Secrets: rotating, CreatedAt: e.clock.Now(),
	}))

	e.status("s1", lt.SessionRequiresAction)
	e.status("s1", lt.SessionIdle)
	eventually(t, func() bool { return len(sessionRecv.requests()) == 2 }, "the session's two notifications")
	eventually(t, func() bool {
		var pending, delivered int
		for _, r := range e.deliveries() {
			switch {
			case r.Status == store.WebhookPending && r.Attempts == 1:
				pending++
			case r.Status == store.WebhookDelivered:
				delivered++
			}
		}
		return pending == 1 && delivered == 3
	}, "the endpoint's 503 recorded, the rest delivered")
	e.clock.Advance(DefaultSchedule[1])
	eventually(t, func() bool {
		rows := e.deliveries()
		if len(rows) != 4 {
			return false
		}
		for _, r := range rows {
			if r.Status != store.WebhookDelivered {
				return false
			}
		}
		return true
	}, "all four delivered")

	for _, got := range sessionRecv.requests() {
		require.NoError(t, got.VerifyErr, "session request %s", got.ID)
		require.Len(t, strings.Fields(got.Signature), 1)
	}
	got := endpointRecv.requests()
	require.Len(t, got, 3, "two notifications, one of them retried")
	ids := map[string][]string{}
	for _, g := range got {
		require.NoError(t, g.VerifyErr, "endpoint request %s", g.ID)
		require.Len(t, strings.Fields(g.Signature), 2, "one signature per secret")
		ids[g.ID] = append(ids[g.ID], g.Timestamp)
	}
	require.Len(t, ids, 2)
	retried := ids[got[0].ID]
	require.Len(t, retried, 2, "the 503 was retried with the same webhook-id")
	require.Equal(t, []string{
		strconv.FormatInt(e.clock.Now().Add(-DefaultSchedule[1]).Unix(), 10),
		strconv.FormatInt(e.clock.Now().Unix(), 10),
	}, retried, "and signed again with the retry's timestamp")
}
