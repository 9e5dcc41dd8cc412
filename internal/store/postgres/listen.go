package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// Notification payloads are "1 <instance> <kind> <seq> <session id>": the
// format's version, the sending Store's instance id, then the notification.
// The session id comes last so that it may hold spaces. Version 2 adds the
// session's status after the commit before the session id ("2 <instance>
// <kind> <seq> <status> <session id>", "-" when it says none), so that a
// waiter on another node need not read the session at each notice.
//
// A node ignores a payload of a version it does not know, and a rolling
// upgrade runs two releases side by side, so version 2 comes in two steps:
// this release reads both and sends version 1 (sentPayloadVersion); the
// next sends version 2, once no node of a release before this one is left.
const (
	payloadV1 = "1"
	payloadV2 = "2"
	// sentPayloadVersion is the version this release sends.
	sentPayloadVersion = payloadV1
)

// noStatus stands for an empty status in a version 2 payload.
const noStatus = "-"

// maxPayload keeps a payload under PostgreSQL's limit (8000 bytes); a
// session id too long for it is left out, which leaves a hint that something
// changed.
const maxPayload = 7900

// notifySQL sends notifications, one per payload, in one statement.
const notifySQL = `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`

// channelName is the NOTIFY channel of a schema, so that deployments sharing
// a database in different schemas do not hear each other. Channel names are
// identifiers (at most 63 bytes); a long schema name is hashed.
func channelName(schema string) string {
	name := "longhaul." + schema
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(schema))
	return "longhaul." + hex.EncodeToString(sum[:16])
}

func encodeNotes(instance string, notes []store.Notification) []string {
	return encodeNotesVersion(sentPayloadVersion, instance, notes)
}

// encodeNotesVersion writes notes as payloads of version v.
func encodeNotesVersion(v, instance string, notes []store.Notification) []string {
	out := make([]string, len(notes))
	for i, n := range notes {
		head := v + " " + instance + " " + strconv.Itoa(int(n.Kind)) + " " + strconv.FormatInt(n.Seq, 10) + " "
		if v == payloadV2 {
			status := n.Status
			if !validStatus(status) {
				status = noStatus
			}
			head += status + " "
		}
		if len(head)+len(n.SessionID) > maxPayload {
			out[i] = head
			continue
		}
		out[i] = head + n.SessionID
	}
	return out
}

// validStatus reports whether s can stand in a payload as a status: a word
// of lowercase letters and underscores (a status of a later release
// included, which a waiter then sees as it is).
func validStatus(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// decodeNote parses a payload of either version; ok is false for one this
// driver did not write (another version, or anything else sent on the
// channel).
func decodeNote(payload string) (instance string, n store.Notification, ok bool) {
	fields := 5
	if strings.HasPrefix(payload, payloadV2+" ") {
		fields = 6
	}
	parts := strings.SplitN(payload, " ", fields)
	if len(parts) != fields || (parts[0] != payloadV1 && parts[0] != payloadV2) || parts[1] == "" {
		return "", n, false
	}
	kind, err := strconv.Atoi(parts[2])
	if err != nil {
		return "", n, false
	}
	switch k := store.NotificationKind(kind); k {
	case store.KindEvents, store.KindRunnable, store.KindSecrets, store.KindActionRaised:
		n.Kind = k
	default:
		return "", n, false
	}
	if n.Seq, err = strconv.ParseInt(parts[3], 10, 64); err != nil || n.Seq < 0 {
		return "", store.Notification{}, false
	}
	if fields == 6 {
		switch status := parts[4]; {
		case status == noStatus:
		case validStatus(status):
			if n.Kind == store.KindEvents { // another kind's says nothing of a session's status
				n.Status = status
			}
		default:
			return "", store.Notification{}, false
		}
	}
	n.SessionID = parts[fields-1]
	return parts[1], n, true
}

// Listener defaults.
const (
	// listenKeepalive is how long the listener waits for a notification
	// before it checks its connection (and reads the database's clock).
	listenKeepalive = 30 * time.Second
	// reconnect backoff, doubling from min to max.
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 10 * time.Second
	// catchUpMargin reaches back before the last moment the connection was
	// known to work, for appends that were in flight then.
	catchUpMargin = time.Minute + appendedAtStep
	// appendedAtStep is how far a session's appended_at may lag its last
	// append (appendSQL moves it at most once a second).
	appendedAtStep = time.Second
	// maxCatchUp bounds the sessions re-announced after a reconnection.
	maxCatchUp = 10000
)

// listener owns one connection that LISTENs on the schema's channel, and
// hands other Stores' notifications to the hub.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	self    string
	hub     *storeutil.Hub
	log     *slog.Logger
	target  string

	keepalive  time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration

	// pid is the backend of the live connection, 0 while there is none;
	// listens counts the LISTENs that took effect, keepalives the idle
	// checks that passed. For tests and metrics.
	pid        atomic.Uint32
	listens    atomic.Int64
	keepalives atomic.Int64
}

func newListener(cfg *pgx.ConnConfig, channel, self string, h *storeutil.Hub, log *slog.Logger, target string) *listener {
	return &listener{
		cfg: cfg, channel: channel, self: self, hub: h, log: log, target: target,
		keepalive: listenKeepalive, minBackoff: listenMinBackoff, maxBackoff: listenMaxBackoff,
	}
}

// connect opens a connection, LISTENs and reads the database's clock; from
// its return on, every notification committed reaches the connection.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, time.Time, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, time.Time{}, scrub(err, l.cfg.Password)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, time.Time{}, scrub(err, l.cfg.Password)
	}
	t, err := now(ctx, conn)
	if err != nil {
		closeConn(conn)
		return nil, time.Time{}, scrub(err, l.cfg.Password)
	}
	l.pid.Store(conn.PgConn().PID())
	l.listens.Add(1)
	return conn, t, nil
}

// now reads the database's clock.
func now(ctx context.Context, conn *pgx.Conn) (time.Time, error) {
	var t time.Time
	err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, err
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// run serves conn until it fails, then reconnects, until ctx ends. alive is
// the database's clock when conn was last known to work.
func (l *listener) run(ctx context.Context, conn *pgx.Conn, alive time.Time) {
	backoff := l.minBackoff
	for {
		err := l.serve(ctx, conn, &alive)
		closeConn(conn)
		l.pid.Store(0)
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("postgres listener lost its connection; reconnecting", "target", l.target, "err", err)
		var t time.Time
		for {
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, l.maxBackoff)
			if conn, t, err = l.connect(ctx); err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("postgres listener cannot reconnect", "target", l.target, "err", err, "retry_in", backoff)
		}
		backoff = l.minBackoff
		l.catchUp(ctx, conn, alive.Add(-catchUpMargin))
		alive = t
		l.log.Info("postgres listener reconnected", "target", l.target)
	}
}

// serve delivers notifications until the connection fails or ctx ends.
// Every keepalive without a notification it checks the connection and
// moves alive to the database's clock.
func (l *listener) serve(ctx context.Context, conn *pgx.Conn, alive *time.Time) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, l.keepalive)
		n, err := conn.WaitForNotification(wctx)
		waited := wctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			l.deliver(n)
		case ctx.Err() != nil:
			return ctx.Err()
		case waited && !conn.IsClosed():
			t, err := now(ctx, conn)
			if err != nil {
				return scrub(err, l.cfg.Password)
			}
			*alive = t
			l.keepalives.Add(1)
		default:
			return scrub(err, l.cfg.Password)
		}
	}
}

func (l *listener) deliver(pn *pgconn.Notification) {
	if pn == nil || pn.Channel != l.channel {
		return
	}
	from, n, ok := decodeNote(pn.Payload)
	if !ok {
		l.log.Debug("postgres listener ignored a payload it does not know", "channel", pn.Channel)
		return
	}
	if from == l.self {
		// Published in-process at commit already.
		return
	}
	l.hub.Publish(n)
}

// catchUp re-announces what the listener may have missed while it had no
// connection: a claimable session, a changed secret and a raised action
// anywhere (hints
// without a session), and each session whose journal grew since since.
func (l *listener) catchUp(ctx context.Context, conn *pgx.Conn, since time.Time) {
	l.hub.Publish(store.Notification{Kind: store.KindRunnable})
	l.hub.Publish(store.Notification{Kind: store.KindSecrets})
	l.hub.Publish(store.Notification{Kind: store.KindActionRaised})
	rows, err := conn.Query(ctx, `SELECT id, last_seq FROM sessions WHERE appended_at >= $1
ORDER BY appended_at LIMIT $2`, since, maxCatchUp)
	if err != nil {
		l.catchUpFailed(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var n store.Notification
		if err := rows.Scan(&n.SessionID, &n.Seq); err != nil {
			l.catchUpFailed(err)
			return
		}
		n.Kind = store.KindEvents
		l.hub.Publish(n)
	}
	if err := rows.Err(); err != nil {
		l.catchUpFailed(err)
	}
}

func (l *listener) catchUpFailed(err error) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		// No sessions table: not migrated yet, so nothing to re-announce.
		return
	}
	l.log.Warn("postgres listener could not re-announce sessions after reconnecting", "target", l.target,
		"err", fmt.Errorf("catch up: %w", scrub(err, l.cfg.Password)))
}

// sleep waits d, or less if ctx ends first (then it returns false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
