package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
)

// receive returns the next notification, failing after a deadline.
func receive(t *testing.T, ch <-chan store.Notification) store.Notification {
	t.Helper()
	select {
	case n, ok := <-ch:
		require.True(t, ok, "channel closed")
		return n
	case <-time.After(20 * time.Second):
		require.FailNow(t, "no notification")
		return store.Notification{}
	}
}

// expect receives until want arrives, skipping others.
func expect(t *testing.T, ch <-chan store.Notification, want store.Notification) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case n, ok := <-ch:
			require.True(t, ok, "channel closed while waiting for %+v", want)
			if n == want {
				return
			}
		case <-deadline:
			require.FailNow(t, "notification not received", "%+v", want)
		}
	}
}

// openTuned opens a store whose listener tune adjusts before it starts.
func openTuned(t *testing.T, dsn string, tune func(*listener)) *Store {
	t.Helper()
	s, err := open(t.Context(), dsn, &Config{MaxConns: 4}, tune)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// twoNodes opens two stores on one migrated schema, as two nodes of one
// deployment; tune adjusts b's listener.
func twoNodes(t *testing.T, tune func(*listener)) (a, b *Store) {
	t.Helper()
	dsn := pgtest.FreshSchema(t)
	a = openDSN(t, dsn, nil)
	require.NoError(t, a.Migrate(t.Context()))
	b = openTuned(t, dsn, tune)
	require.NotEqual(t, a.instance, b.instance)
	require.Equal(t, a.channel, b.channel)
	return a, b
}

// TestSubscribeAcrossStores: a subscriber on one node hears what another
// node commits, and only what it commits.
func TestSubscribeAcrossStores(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, nil)
	ch, cancel := b.Subscribe(t.Context())
	defer cancel()

	createSession(t, a, "ses_x", true)
	require.Equal(t, store.Notification{Kind: store.KindEvents, SessionID: "ses_x", Seq: 1}, receive(t, ch))
	require.Equal(t, store.Notification{Kind: store.KindRunnable, SessionID: "ses_x"}, receive(t, ch))

	// A refused append commits nothing and notifies nobody.
	_, err := a.EventAppend(t.Context(), appendParams("ses_x", 0, 1))
	require.ErrorIs(t, err, store.ErrConflict)
	p := appendParams("ses_x", 1, 2)
	p.Runnable = true
	_, err = a.EventAppend(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, store.Notification{Kind: store.KindEvents, SessionID: "ses_x", Seq: 3}, receive(t, ch))
	require.Equal(t, store.Notification{Kind: store.KindRunnable, SessionID: "ses_x"}, receive(t, ch))

	// A claim, released, makes the session claimable again on every node.
	l, err := a.LeaseClaim(t.Context(), &store.LeaseClaimParams{Owner: "w", Now: testTime, ExpiresAt: testTime.Add(time.Minute), Limit: 1})
	require.NoError(t, err)
	require.Len(t, l, 1)
	require.NoError(t, a.LeaseRelease(t.Context(), l[0]))
	require.Equal(t, store.Notification{Kind: store.KindRunnable, SessionID: "ses_x"}, receive(t, ch))

	_, err = a.SecretPut(t.Context(), &store.SecretRow{
		Project: "default", Name: "TOKEN", Ciphertext: []byte{1}, Nonce: []byte{2}, KeyID: "k", Hosts: []string{"h"},
		Inject: []byte(`{}`), CreatedAt: testTime, UpdatedAt: testTime,
	})
	require.NoError(t, err)
	require.Equal(t, store.Notification{Kind: store.KindSecrets}, receive(t, ch))

	// Spaces and odd characters in a session id survive the payload.
	createSession(t, a, "ses with spaces é", false)
	require.Equal(t, store.Notification{Kind: store.KindEvents, SessionID: "ses with spaces é", Seq: 1}, receive(t, ch))
}

// TestOwnNotificationsOnce: a node's subscribers hear its own commits once
// (in-process, at commit), not a second time through NOTIFY.
func TestOwnNotificationsOnce(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, nil)
	ch, cancel := a.Subscribe(t.Context())
	defer cancel()
	chB, cancelB := b.Subscribe(t.Context())
	defer cancelB()
	createSession(t, a, "ses_own", false)
	for i := int64(1); i <= 5; i++ {
		_, err := a.EventAppend(t.Context(), appendParams("ses_own", i, 1))
		require.NoError(t, err)
	}
	// Once b has heard a's last NOTIFY, b's marker is sent after all of
	// a's, and NOTIFY delivers in order: when the marker reaches a, a's own
	// notifications have too, so any duplicate would be in the channel.
	expect(t, chB, store.Notification{Kind: store.KindEvents, SessionID: "ses_own", Seq: 6})
	createSession(t, b, "ses_marker", false)
	var got []store.Notification
	for {
		n := receive(t, ch)
		got = append(got, n)
		if n.SessionID == "ses_marker" {
			break
		}
	}
	want := []store.Notification{}
	for seq := int64(1); seq <= 6; seq++ {
		status := "running"
		if seq == 1 {
			status = "queued" // the creation's
		}
		want = append(want, store.Notification{Kind: store.KindEvents, SessionID: "ses_own", Seq: seq, Status: status})
	}
	// Another node's says no status: the payload does not carry it.
	want = append(want, store.Notification{Kind: store.KindEvents, SessionID: "ses_marker", Seq: 1})
	require.Equal(t, want, got)
}

// TestListenerReconnects: when the LISTEN connection drops, the store
// reconnects, re-announces what grew meanwhile and sends hints, and goes on
// delivering.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	// A backoff long enough for a's writes to land while b is away.
	a, b := twoNodes(t, func(l *listener) { l.minBackoff = 500 * time.Millisecond })
	ch, cancel := b.Subscribe(t.Context())
	defer cancel()
	createSession(t, a, "ses_before", false)
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_before", Seq: 1})

	listens := b.lis.listens.Load()
	pgtest.Exec(t, "SELECT pg_terminate_backend($1)", int64(b.lis.pid.Load()))
	poll(t, "the listener notices", func() bool { return b.lis.pid.Load() == 0 || b.lis.listens.Load() > listens })
	createSession(t, a, "ses_during", true)
	_, err := a.EventAppend(t.Context(), appendParams("ses_during", 1, 2))
	require.NoError(t, err)

	// Whether it arrives by NOTIFY or by the re-announcement, it arrives.
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_during", Seq: 3})
	poll(t, "the listener reconnects", func() bool { return b.lis.listens.Load() > listens })

	createSession(t, a, "ses_after", false)
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_after", Seq: 1})
}

// TestReconnectSendsHints: after a reconnection the subscribers get a
// claimable-session hint, a secrets hint and a raised-action hint with no
// session, since what they missed cannot be known.
func TestReconnectSendsHints(t *testing.T) {
	t.Parallel()
	_, b := twoNodes(t, func(l *listener) { l.minBackoff = time.Millisecond })
	ch, cancel := b.Subscribe(t.Context())
	defer cancel()
	pgtest.Exec(t, "SELECT pg_terminate_backend($1)", int64(b.lis.pid.Load()))
	expect(t, ch, store.Notification{Kind: store.KindRunnable})
	expect(t, ch, store.Notification{Kind: store.KindSecrets})
	expect(t, ch, store.Notification{Kind: store.KindActionRaised})
}

// TestKeepalive: the listener's idle wakeups check the connection and leave
// it listening.
func TestKeepalive(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, func(l *listener) { l.keepalive = 20 * time.Millisecond })
	poll(t, "keepalives", func() bool { return b.lis.keepalives.Load() >= 3 })
	ch, cancel := b.Subscribe(t.Context())
	defer cancel()
	listens := b.lis.listens.Load()
	createSession(t, a, "ses_k", false)
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_k", Seq: 1})
	require.Equal(t, listens, b.lis.listens.Load(), "no reconnection was needed")
}

func TestSubscribersClosedByClose(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ch, cancel := s.Subscribe(t.Context())
	defer cancel()
	require.NoError(t, s.Close())
	_, ok := <-ch
	require.False(t, ok, "Close closes the subscribers' channels")
	late, lateCancel := s.Subscribe(t.Context())
	lateCancel()
	_, ok = <-late
	require.False(t, ok, "a subscription after Close is closed")
}

func TestCoalesce(t *testing.T) {
	t.Parallel()
	got := coalesce([]store.Notification{
		{Kind: store.KindEvents, SessionID: "a", Seq: 2, Status: "queued"},
		{Kind: store.KindRunnable, SessionID: "a"},
		{Kind: store.KindEvents, SessionID: "b", Seq: 1},
		{Kind: store.KindEvents, SessionID: "a", Seq: 5, Status: "idle"},
		{Kind: store.KindEvents, SessionID: "a", Seq: 4, Status: "running"},
		{Kind: store.KindSecrets},
		{Kind: store.KindRunnable, SessionID: "a"},
		{Kind: store.KindSecrets},
	})
	require.Equal(t, []store.Notification{
		{Kind: store.KindEvents, SessionID: "a", Seq: 5, Status: "idle"}, // the highest seq's status
		{Kind: store.KindRunnable, SessionID: "a"},
		{Kind: store.KindEvents, SessionID: "b", Seq: 1},
		{Kind: store.KindSecrets},
	}, got)
	require.Empty(t, coalesce(nil))
}

// TestNotifierCoalescesABurst: appends committed faster than the notifier
// sends arrive at other nodes as few notifications, the last seq included.
func TestNotifierCoalescesABurst(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, nil)
	ch, cancel := b.Subscribe(t.Context())
	defer cancel()
	createSession(t, a, "ses_burst", false)
	const appends = 50
	for i := int64(1); i <= appends; i++ {
		_, err := a.EventAppend(t.Context(), appendParams("ses_burst", i, 1))
		require.NoError(t, err)
	}
	expect(t, ch, store.Notification{Kind: store.KindEvents, SessionID: "ses_burst", Seq: appends + 1})
	require.LessOrEqual(t, a.notifier.sent.Load(), int64(appends+1))
}

// TestPayloads: this release sends version 1, which says no status, and
// reads version 1 and version 2, which does (the next release sends it).
func TestPayloads(t *testing.T) {
	t.Parallel()
	notes := []store.Notification{
		{Kind: store.KindEvents, SessionID: "ses_1", Seq: 42, Status: "requires_action"},
		{Kind: store.KindEvents, SessionID: "ses_2", Seq: 3},
		{Kind: store.KindRunnable, SessionID: "ses with  spaces"},
		{Kind: store.KindSecrets},
		{Kind: store.KindEvents, SessionID: strings.Repeat("x", maxPayload), Seq: 7, Status: "idle"},
		{Kind: store.KindEvents, SessionID: "ses_3", Seq: 8, Status: "not a status"},
	}
	for _, v := range []string{payloadV1, payloadV2} {
		payloads := encodeNotesVersion(v, "inst", notes)
		require.Len(t, payloads, len(notes))
		for i, p := range payloads {
			require.LessOrEqual(t, len(p), maxPayload)
			require.True(t, strings.HasPrefix(p, v+" "), p)
			from, n, ok := decodeNote(p)
			require.True(t, ok, p)
			require.Equal(t, "inst", from)
			want := notes[i]
			if i == 4 {
				want.SessionID = "" // too long to send: a hint without a session
			}
			if v == payloadV1 || i == 5 {
				want.Status = "" // not said, or not a status the payload can hold
			}
			require.Equal(t, want, n, p)
		}
	}
	require.Equal(t, encodeNotesVersion(payloadV1, "inst", notes), encodeNotes("inst", notes), "this release sends version 1")
	require.Equal(t, "2 inst 1 42 requires_action ses_1", encodeNotesVersion(payloadV2, "inst", notes[:1])[0])
	for _, tc := range []struct {
		payload string
		want    store.Notification
	}{
		{"2 inst 1 9 - ses x", store.Notification{Kind: store.KindEvents, Seq: 9, SessionID: "ses x"}},
		{"2 inst 1 9 idle ses x", store.Notification{Kind: store.KindEvents, Seq: 9, SessionID: "ses x", Status: "idle"}},
		{"2 inst 1 9 some_later_status s", store.Notification{Kind: store.KindEvents, Seq: 9, SessionID: "s", Status: "some_later_status"}},
		{"2 inst 2 0 idle s", store.Notification{Kind: store.KindRunnable, SessionID: "s"}},      // a status says nothing there
		{"2 inst 1 9 idle ", store.Notification{Kind: store.KindEvents, Seq: 9, Status: "idle"}}, // a session id too long to send
	} {
		from, n, ok := decodeNote(tc.payload)
		require.True(t, ok, tc.payload)
		require.Equal(t, "inst", from)
		require.Equal(t, tc.want, n, tc.payload)
	}
	for _, bad := range []string{"", "hello", "2 inst 1 0 s", "3 inst 1 0 s", "3 inst 1 0 idle s", "1  1 0 s", "1 inst x 0 s", "1 inst 9 0 s",
		"1 inst 1 -1 s", "1 inst 1 1.5 s", "1 inst 1 0", "2 inst 1 0 Idle s", "2 inst 1 0  s", "2  1 0 idle s", "2 inst 1 -1 idle s"} {
		_, _, ok := decodeNote(bad)
		require.False(t, ok, "%q", bad)
	}
}

// TestStatusFromAVersion2Node: a node of the next release sends version 2
// payloads, whose status reaches this node's subscribers, as this node's
// own commits' does.
func TestStatusFromAVersion2Node(t *testing.T) {
	t.Parallel()
	a, _ := twoNodes(t, nil)
	ch, cancel := a.Subscribe(t.Context())
	defer cancel()
	for _, p := range encodeNotesVersion(payloadV2, "a-later-node", []store.Notification{
		{Kind: store.KindEvents, SessionID: "ses_later", Seq: 4, Status: "waiting"},
		{Kind: store.KindEvents, SessionID: "ses_later", Seq: 5},
	}) {
		pgtest.Exec(t, "SELECT pg_notify($1, $2)", a.channel, p)
	}
	require.Equal(t, store.Notification{Kind: store.KindEvents, SessionID: "ses_later", Seq: 4, Status: "waiting"}, receive(t, ch))
	require.Equal(t, store.Notification{Kind: store.KindEvents, SessionID: "ses_later", Seq: 5}, receive(t, ch))
}

// TestLeaseHoldersAppendsMayWait: a lease holder's own appends, which no
// other node acts on, reach other nodes up to the notifier's delay late, in
// one statement with the next notification that may not wait (or at Close),
// while this node's subscribers hear each at once.
func TestLeaseHoldersAppendsMayWait(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, nil)
	a.notifier.delay.Store(int64(time.Hour))
	chA, cancelA := a.Subscribe(t.Context())
	defer cancelA()
	chB, cancelB := b.Subscribe(t.Context())
	defer cancelB()
	createSession(t, a, "ses_held", true)
	expect(t, chA, store.Notification{Kind: store.KindRunnable, SessionID: "ses_held"})
	expect(t, chB, store.Notification{Kind: store.KindRunnable, SessionID: "ses_held"})
	leases, err := a.LeaseClaim(t.Context(), &store.LeaseClaimParams{Owner: "w", Now: testTime, ExpiresAt: testTime.Add(time.Minute), Limit: 1})
	require.NoError(t, err)
	require.Len(t, leases, 1)

	for seq := int64(1); seq <= 3; seq++ {
		p := appendParams("ses_held", seq, 1)
		p.Fence, p.Runnable = &leases[0], true
		_, err := a.EventAppend(t.Context(), p)
		require.NoError(t, err)
		select {
		case n := <-chA:
			require.Equal(t, store.Notification{Kind: store.KindEvents, SessionID: "ses_held", Seq: seq + 1, Status: "running"}, n)
		default:
			require.FailNow(t, "this node's subscriber must hear an append before it returns")
		}
	}
	// A creation may not wait: it goes at once, the appends held back with it.
	createSession(t, a, "ses_now", false)
	require.Equal(t, store.Notification{Kind: store.KindEvents, SessionID: "ses_held", Seq: 4}, receive(t, chB))
	require.Equal(t, store.Notification{Kind: store.KindEvents, SessionID: "ses_now", Seq: 1}, receive(t, chB))

	// What waits when the store closes is sent then.
	p := appendParams("ses_held", 4, 1)
	p.Fence = &leases[0]
	_, err = a.EventAppend(t.Context(), p)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.Equal(t, store.Notification{Kind: store.KindEvents, SessionID: "ses_held", Seq: 5}, receive(t, chB))
}

// TestLeaseHoldersAppendsArriveUnprompted: held back, a lease holder's
// append still reaches other nodes with nothing else to send.
func TestLeaseHoldersAppendsArriveUnprompted(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, nil)
	chB, cancelB := b.Subscribe(t.Context())
	defer cancelB()
	createSession(t, a, "ses_alone", true)
	leases, err := a.LeaseClaim(t.Context(), &store.LeaseClaimParams{Owner: "w", Now: testTime, ExpiresAt: testTime.Add(time.Minute), Limit: 1})
	require.NoError(t, err)
	require.Len(t, leases, 1)
	p := appendParams("ses_alone", 1, 2)
	p.Fence = &leases[0]
	_, err = a.EventAppend(t.Context(), p)
	require.NoError(t, err)
	expect(t, chB, store.Notification{Kind: store.KindEvents, SessionID: "ses_alone", Seq: 3})
}
