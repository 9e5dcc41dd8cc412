package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Clock is the time source; tests inject a fake one.
type Clock interface {
	Now() time.Time
	// After fires once d has passed (at once when d <= 0).
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// DefaultSchedule is the Standard Webhooks retry schedule: the delay before
// each attempt, the first being immediate.
var DefaultSchedule = []time.Duration{
	0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// Defaults.
const (
	DefaultTimeout        = 15 * time.Second
	DefaultRescanInterval = time.Minute
	DefaultConcurrency    = 8
	// DefaultClaimMargin is how much longer than Timeout a claim lasts by
	// default: the time to read the target's secrets and record the
	// attempt, and clock skew between nodes.
	DefaultClaimMargin = time.Minute
)

// releaseTimeout bounds the release of the claims a stopping dispatcher
// holds (its caller has already given up on the attempts).
const releaseTimeout = 10 * time.Second

// Config configures a Dispatcher. The zero value is valid.
type Config struct {
	// AllowPrivate lists IP addresses that webhooks may reach although
	// they are private, loopback or link-local (e.g. "127.0.0.1" in tests).
	AllowPrivate []string
	// Ports are the destination ports allowed (default 80 and 443).
	Ports []int
	// Schedule overrides DefaultSchedule (its first entry is the delay of
	// the first attempt).
	Schedule []time.Duration
	// Timeout bounds one request (default DefaultTimeout).
	Timeout time.Duration
	// RescanInterval is how often every session is re-read, in case a
	// notification was missed (store notifications are hints).
	RescanInterval time.Duration
	// Concurrency bounds the requests in flight (default DefaultConcurrency).
	Concurrency int
	// NodeID owns the dispatcher's claims on deliveries. It must differ
	// between the dispatchers sharing a store, and should stay the same
	// across a node's restarts: a dispatcher starting releases the claims
	// its id holds (its previous run died mid-attempt), so those deliveries
	// are sent at once rather than when the claims run out. Default: a
	// random id, new at every New.
	NodeID string
	// ClaimTTL is how long a claim on a delivery lasts: an attempt must
	// end (be sent and recorded) within it, or another dispatcher may send
	// the delivery again. It must be longer than Timeout (default Timeout
	// plus DefaultClaimMargin).
	ClaimTTL time.Duration
	Clock    Clock
	Logger   *slog.Logger
	// Resolver and Dialer replace the network's (tests); see egress.Config.
	Resolver egress.Resolver
	Dialer   egress.Dialer
}

// Dispatcher turns journal events into outbox rows and delivers them,
// alongside the dispatchers of other nodes on the same store (see the
// package comment). Start and Stop it; it is safe for concurrent use.
type Dispatcher struct {
	st       store.Store
	clock    Clock
	log      *slog.Logger
	schedule []time.Duration
	timeout  time.Duration
	rescan   time.Duration
	conc     int
	owner    string        // NodeID: the owner of this dispatcher's claims
	claimTTL time.Duration // how long a claim lasts
	client   *http.Client
	// pol is the policy every delivery dials through; CheckTarget asks it
	// about a URL when one is configured.
	pol *egress.Policy

	wake chan struct{}

	mu       sync.Mutex
	sessions map[string]sessionInfo // session id → what its notifications need, read once
	// cursors caches each session's durable cursor, so that a rescan or a
	// notification about events already scanned costs no query.
	cursors map[string]int64

	runMu  sync.Mutex
	cancel context.CancelCauseFunc
	done   chan struct{}
	runErr error // set before done closes
}

// New returns a Dispatcher on st. It refuses an invalid cfg with an error
// naming the field.
func New(st store.Store, cfg *Config) (*Dispatcher, error) {
	if st == nil {
		return nil, errors.New("new webhook dispatcher: store is nil")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	pol, err := egress.NewPublicPolicy(c.AllowPrivate)
	if err != nil {
		return nil, fmt.Errorf("new webhook dispatcher: %w", err)
	}
	pol, err = pol.WithConfig(egress.Config{Resolver: c.Resolver, Dialer: c.Dialer, Ports: c.Ports})
	if err != nil {
		return nil, fmt.Errorf("new webhook dispatcher: %w", err)
	}
	for i, d := range c.Schedule {
		if d < 0 {
			return nil, fmt.Errorf("new webhook dispatcher: schedule[%d] is negative", i)
		}
	}
	if err := checkNodeID(c.NodeID); err != nil {
		return nil, fmt.Errorf("new webhook dispatcher: %w", err)
	}
	d := &Dispatcher{
		st:       st,
		clock:    c.Clock,
		log:      c.Logger,
		schedule: c.Schedule,
		timeout:  c.Timeout,
		rescan:   c.RescanInterval,
		conc:     c.Concurrency,
		owner:    c.NodeID,
		claimTTL: c.ClaimTTL,
		wake:     make(chan struct{}, 1),
		sessions: make(map[string]sessionInfo),
		cursors:  make(map[string]int64),
	}
	if d.clock == nil {
		d.clock = realClock{}
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if len(d.schedule) == 0 {
		d.schedule = DefaultSchedule
	}
	if d.timeout <= 0 {
		d.timeout = DefaultTimeout
	}
	if d.rescan <= 0 {
		d.rescan = DefaultRescanInterval
	}
	if d.conc <= 0 {
		d.conc = DefaultConcurrency
	}
	if d.owner == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		d.owner = "webhooks-" + hex.EncodeToString(b[:])
	}
	switch {
	case d.claimTTL == 0:
		d.claimTTL = d.timeout + DefaultClaimMargin
	case d.claimTTL <= d.timeout:
		return nil, fmt.Errorf("new webhook dispatcher: ClaimTTL %s must be longer than Timeout %s", d.claimTTL, d.timeout)
	}
	d.log = d.log.With("node", d.owner)
	d.pol = pol
	d.client = &http.Client{
		Transport: &http.Transport{
			Proxy: nil, // never through an environment proxy: the policy dials
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, port, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, fmt.Errorf("dial %s: %w", addr, err)
				}
				p, err := strconv.Atoi(port)
				if err != nil {
					return nil, fmt.Errorf("dial %s: bad port: %w", addr, err)
				}
				conn, _, err := pol.Dial(ctx, network, host, p)
				return conn, err
			},
			ForceAttemptHTTP2:     true,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: d.timeout,
		},
		// A redirect is an answer that is not a 2xx: it is retried, never
		// followed (following would let a receiver point the server at
		// another address with the signature attached).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       d.timeout,
	}
	return d, nil
}

// maxNodeIDLength bounds NodeID, which is stored with every claim and
// attempt.
const maxNodeIDLength = 128

// checkNodeID refuses a NodeID that could not be stored or shown as is.
func checkNodeID(id string) error {
	if len(id) > maxNodeIDLength {
		return fmt.Errorf("NodeID is longer than %d bytes", maxNodeIDLength)
	}
	if !utf8.ValidString(id) {
		return errors.New("NodeID is not valid UTF-8")
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("NodeID %q contains a space or control character", id)
		}
	}
	return nil
}

// NodeID returns the owner of the dispatcher's claims (Config.NodeID, or
// the random id it got).
func (d *Dispatcher) NodeID() string { return d.owner }

var errStopped = errors.New("webhook dispatcher stopped")

// Start starts the dispatcher: it scans every session, then follows the
// store's notifications and delivers due notifications until Stop. ctx only
// carries values: cancelling it does not stop the dispatcher.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.runMu.Lock()
	defer d.runMu.Unlock()
	if d.cancel != nil {
		return errors.New("start webhook dispatcher: already started")
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	d.cancel = cancel
	d.done = make(chan struct{})
	go func() {
		defer close(d.done)
		d.runErr = d.run(runCtx)
	}()
	return nil
}

// Stop stops the dispatcher and waits for it (or for ctx). A request in
// flight is abandoned unrecorded and its claim released: its delivery is
// due at once, and the next start (or another node) sends it again with
// the same webhook-id, which receivers deduplicate by. It returns the error
// that stopped the dispatcher earlier, if any (the store closed under it).
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.runMu.Lock()
	cancel, done := d.cancel, d.done
	d.runMu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel(errStopped)
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stop webhook dispatcher: %w", context.Cause(ctx))
	}
	return d.runErr
}

// run is the dispatcher's life: a scanner and a deliverer, until ctx ends
// or one of them fails.
func (d *Dispatcher) run(ctx context.Context) error {
	// Claims this node id holds now were left by its previous run, which
	// died mid-attempt: make their deliveries due at once instead of when
	// the claims run out.
	if err := d.releaseClaims(ctx, "previous run", true); errors.Is(err, store.ErrClosed) {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, unsub := d.st.Subscribe(ctx)
	defer unsub()

	errc := make(chan error, 2)
	go func() { errc <- d.scanLoop(ctx, ch) }()
	go func() { errc <- d.deliverLoop(ctx) }()
	err := <-errc
	cancel()
	err2 := <-errc
	if err == nil || errors.Is(err, context.Canceled) {
		err = err2
	}
	// Every attempt has ended (deliverLoop waits for them); those that
	// Stop cut short left their claims, which are released so that their
	// deliveries are due at once.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer rcancel()
	_ = d.releaseClaims(rctx, "abandoned attempts", false)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// releaseClaims releases the claims this dispatcher's id holds; why says
// whose they are, for the log. A failure is logged: the claims then run
// out on their own.
func (d *Dispatcher) releaseClaims(ctx context.Context, why string, inFlightLost bool) error {
	n, err := d.st.WebhookReleaseClaims(ctx, d.owner, d.clock.Now(), inFlightLost)
	switch {
	case errors.Is(err, store.ErrClosed) || ctx.Err() != nil:
	case err != nil:
		d.log.Warn("webhook claims not released; they run out on their own", "claims_of", why, "err", err)
	case n > 0:
		d.log.Info("webhook claims released", "claims_of", why, "count", n)
	}
	return err
}

// scanLoop processes each session whose journal grows, and every session at
// start-up and each RescanInterval.
func (d *Dispatcher) scanLoop(ctx context.Context, ch <-chan store.Notification) error {
	for {
		if err := d.scanAll(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, store.ErrClosed) {
				return err
			}
			d.log.Warn("webhook scan", "err", err)
		}
		timer := d.clock.After(d.rescan)
	wait:
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer:
				break wait
			case n, ok := <-ch:
				if !ok {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					return store.ErrClosed
				}
				if n.Kind != store.KindEvents || n.SessionID == "" {
					continue
				}
				if err := d.scanSession(ctx, n.SessionID, n.Seq, nil); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					d.log.Warn("webhook scan session", "session_id", n.SessionID, "err", err)
				}
			}
		}
	}
}

// scanAll scans every session, page by page.
func (d *Dispatcher) scanAll(ctx context.Context) error {
	cursor := ""
	for {
		page, err := d.st.SessionList(ctx, &store.SessionListParams{Cursor: cursor, Limit: 500})
		if err != nil {
			return fmt.Errorf("scan webhooks: %w", err)
		}
		// One read of the endpoints tells, for the whole page, which
		// sessions without a webhook_url nobody listens to.
		eps, err := d.st.WebhookEndpointList(ctx, "")
		if err != nil {
			return fmt.Errorf("scan webhooks: %w", err)
		}
		for _, s := range page {
			if err := d.scanSession(ctx, s.ID, s.LastSeq, eps); err != nil {
				return err
			}
		}
		if len(page) < 500 {
			return nil
		}
		cursor = page[len(page)-1].ID
	}
}

// sessionInfo is what a session's notifications need to know of it; none
// of it changes after its creation.
type sessionInfo struct {
	// url is the session's webhook_url ("" when none), from its
	// session.created event.
	url string
	// project is the session's project: only the endpoints of that
	// project hear of it.
	project string
	// parentID is the session's parent ("" for a root): a sub-agent's
	// notifications go to its root's webhook_url (urlTarget).
	parentID string
}

// sessionInfo returns the session's webhook_url, project and parent, read
// once.
func (d *Dispatcher) sessionInfo(ctx context.Context, sessionID string) (sessionInfo, error) {
	d.mu.Lock()
	info, ok := d.sessions[sessionID]
	d.mu.Unlock()
	if ok {
		return info, nil
	}
	evs, err := d.st.EventList(ctx, sessionID, 0, 1)
	if err != nil {
		return sessionInfo{}, fmt.Errorf("read session %s: %w", sessionID, err)
	}
	if len(evs) == 0 {
		return sessionInfo{}, errNotCreated // nothing to cache
	}
	if evs[0].Type == lt.EventSessionCreated {
		data, err := d.eventData(ctx, evs[0].Data)
		if err != nil {
			return sessionInfo{}, fmt.Errorf("read session %s: session.created: %w", sessionID, err)
		}
		var created lt.SessionCreatedData
		if err := json.Unmarshal(data, &created); err != nil {
			return sessionInfo{}, fmt.Errorf("read session %s: session.created: %w", sessionID, err)
		}
		info.url = created.WebhookURL
	}
	row, err := d.st.SessionGet(ctx, sessionID)
	if err != nil {
		return sessionInfo{}, fmt.Errorf("read session %s: %w", sessionID, err)
	}
	// Sessions stored before projects existed have none: the default
	// project, as the migration puts them in.
	info.project = cmp.Or(row.Project, lt.DefaultProject)
	info.parentID = row.ParentID
	d.mu.Lock()
	d.sessions[sessionID] = info
	d.mu.Unlock()
	return info, nil
}

// eventData returns an event's payload: data, or the blob it was moved to
// when it was too large for the journal (a session created with a long
// input: the engine's BlobThreshold), which must be read for its
// webhook_url.
func (d *Dispatcher) eventData(ctx context.Context, data json.RawMessage) (json.RawMessage, error) {
	if !bytes.HasPrefix(data, []byte(`{"blob":`)) {
		return data, nil
	}
	var stub lt.BlobData
	if err := json.Unmarshal(data, &stub); err != nil || len(stub.Blob.SHA256) != sha256.Size*2 {
		return data, nil // not a stub: a payload of its own
	}
	full, err := d.st.BlobGet(ctx, stub.Blob.SHA256)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", stub.Blob.SHA256, err)
	}
	return full, nil
}

// errNotCreated: the session has no event yet, so nothing to notify.
var errNotCreated = errors.New("the session has no event yet")

// SessionSecret returns the signing secret of the session's webhook_url
// notifications, creating it if the dispatcher has not yet; the server
// returns it once as webhook_secret when it creates the session.
func (d *Dispatcher) SessionSecret(ctx context.Context, sessionID string) (string, error) {
	ws, err := d.st.WebhookSessionInit(ctx, sessionID, NewSecret())
	if err != nil {
		return "", fmt.Errorf("webhook session secret: %w", err)
	}
	return ws.Secret, nil
}

// target is one destination of a session's notifications.
type target struct {
	endpointID string // "" for the session's webhook_url
	url        string
	events     []string
	since      time.Time // only events at or after (endpoints)
	// root is set on a sub-agent's target that is its root's
	// webhook_url: the root's id, which the notifications carry.
	root string
}

func (t target) wants(typ string, at time.Time) bool {
	if at.Before(t.since) {
		return false
	}
	if len(t.events) == 0 {
		return true
	}
	for _, e := range t.events {
		if e == typ {
			return true
		}
	}
	return false
}

// scanSession enqueues the notifications of the session's events after its
// cursor. lastSeq is the session's last seq as the caller knows it (0:
// unknown); eps are the endpoints as the caller last read them (nil: read
// them), used only to skip a session nobody listens to.
func (d *Dispatcher) scanSession(ctx context.Context, sessionID string, lastSeq int64, eps []*store.WebhookEndpointRow) error {
	d.mu.Lock()
	cached, ok := d.cursors[sessionID]
	d.mu.Unlock()
	if ok && lastSeq > 0 && lastSeq <= cached {
		return nil // already scanned
	}
	info, err := d.sessionInfo(ctx, sessionID)
	if errors.Is(err, errNotCreated) {
		return nil
	}
	if err != nil {
		return err
	}
	own, err := d.urlTarget(ctx, sessionID, info)
	if err != nil {
		return fmt.Errorf("scan session %s: %w", sessionID, err)
	}
	if own.url == "" {
		if eps == nil {
			if eps, err = d.st.WebhookEndpointList(ctx, info.project); err != nil {
				return fmt.Errorf("scan session %s: %w", sessionID, err)
			}
		}
		if len(endpointTargets(eps, info.project)) == 0 {
			// Nobody to tell: write nothing. The cursor stays, so an
			// endpoint created later still sees this session's events
			// from its creation on.
			return nil
		}
	}
	ws, err := d.st.WebhookSessionInit(ctx, sessionID, NewSecret())
	if err != nil {
		return fmt.Errorf("scan session %s: %w", sessionID, err)
	}
	cursor := ws.Cursor
	// The cursor is the session's own, whoever its notifications go to;
	// whether a 410 disabled its webhook_url is told by the state of the
	// session whose URL it is (a sub-agent's root).
	urlState := ws
	if own.root != "" {
		if urlState, err = d.st.WebhookSessionInit(ctx, own.root, NewSecret()); err != nil {
			return fmt.Errorf("scan session %s: %w", sessionID, err)
		}
	}
	for {
		evs, err := d.st.EventList(ctx, sessionID, cursor, 256)
		if err != nil {
			return fmt.Errorf("scan session %s: %w", sessionID, err)
		}
		if len(evs) == 0 {
			d.mu.Lock()
			d.cursors[sessionID] = cursor
			d.mu.Unlock()
			return nil
		}
		// The endpoints are read after the events: every endpoint
		// created before these events were appended is then in the list.
		// A list read earlier (eps, read once for a page of sessions)
		// could miss one created in between, and the cursor would move
		// past events the endpoint is owed.
		eps, err := d.st.WebhookEndpointList(ctx, info.project)
		if err != nil {
			return fmt.Errorf("scan session %s: %w", sessionID, err)
		}
		targets := endpointTargets(eps, info.project)
		if own.url != "" && urlState.DisabledAt == nil {
			targets = append(targets, own)
		}
		now := d.clock.Now()
		var rows []*store.WebhookDeliveryRow
		for _, ev := range evs {
			typ := notificationType(ev)
			if typ == "" {
				continue
			}
			for _, t := range targets {
				if t.wants(typ, ev.Time) {
					rows = append(rows, newDelivery(t, info.project, sessionID, ev.Seq, typ, now, now.Add(d.schedule[0])))
				}
			}
		}
		last := evs[len(evs)-1].Seq
		err = d.st.WebhookEnqueue(ctx, sessionID, cursor, last, rows)
		if errors.Is(err, store.ErrConflict) {
			// Another scanner (another node's dispatcher) moved the
			// cursor since this one read it, enqueueing in the same
			// transaction everything up to where it moved it; rows
			// derived again from those events would be the same rows.
			// Go on from there: what lies past it is this scan's to
			// enqueue (or the other's, whose cursor move would then
			// conflict in turn).
			moved, rerr := d.st.WebhookSessionInit(ctx, sessionID, NewSecret())
			if rerr != nil {
				return fmt.Errorf("scan session %s: %w", sessionID, rerr)
			}
			if moved.Cursor == cursor {
				return fmt.Errorf("scan session %s: %w", sessionID, err)
			}
			d.log.Debug("webhook scan: another scanner moved the cursor", "session_id", sessionID,
				"from", cursor, "to", moved.Cursor)
			cursor = moved.Cursor
			if own.root == "" {
				urlState = moved
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("scan session %s: %w", sessionID, err)
		}
		cursor = last
		if len(rows) > 0 {
			d.poke()
		}
	}
}

// endpointTargets returns the enabled endpoints of project as targets: an
// endpoint hears only of the sessions of its project.
func endpointTargets(eps []*store.WebhookEndpointRow, project string) []target {
	var targets []target
	for _, ep := range eps {
		if ep.DisabledAt == nil && ep.Project == project {
			targets = append(targets, target{endpointID: ep.ID, url: ep.URL, events: ep.Events, since: ep.CreatedAt})
		}
	}
	return targets
}

// notificationType maps an event to the notification it causes, or "".
func notificationType(ev store.Event) string {
	switch ev.Type {
	case lt.EventTurnCompleted:
		return lt.WebhookSessionCompleted
	case lt.EventSessionStatusChanged:
		var sc lt.SessionStatusChangedData
		if json.Unmarshal(ev.Data, &sc) != nil {
			return ""
		}
		switch sc.To {
		case lt.SessionRequiresAction:
			return lt.WebhookSessionRequiresAction
		case lt.SessionIdle:
			return lt.WebhookSessionIdle
		case lt.SessionFailed:
			return lt.WebhookSessionFailed
		case lt.SessionCancelled:
			return lt.WebhookSessionCancelled
		}
	}
	return ""
}

// deliveryID derives the webhook-id from what identifies a notification, so
// that deriving it again (after a crash) finds the same outbox row.
func deliveryID(endpointID, sessionID string, seq int64, typ string) string {
	tgt := endpointID
	if tgt == "" {
		tgt = "session"
	}
	h := sha256.Sum256([]byte(tgt + "\x00" + sessionID + "\x00" + strconv.FormatInt(seq, 10) + "\x00" + typ))
	return "msg_" + hex.EncodeToString(h[:16])
}

func newDelivery(t target, project, sessionID string, seq int64, typ string, now, due time.Time) *store.WebhookDeliveryRow {
	n := lt.WebhookNotification{Type: typ, SessionID: sessionID, EventSeq: seq, RootSessionID: t.root}
	body, _ := json.Marshal(n) // cannot fail
	return &store.WebhookDeliveryRow{
		ID: deliveryID(t.endpointID, sessionID, seq, typ), EndpointID: t.endpointID, Project: project, SessionID: sessionID,
		URL: t.url, Type: typ, EventSeq: seq, Body: body, Status: store.WebhookPending,
		NextAttemptAt: &due, CreatedAt: now, UpdatedAt: now,
	}
}

// poke wakes the delivery loop.
func (d *Dispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}
