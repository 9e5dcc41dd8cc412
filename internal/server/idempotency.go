package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/store"
)

// DefaultIdempotencyRetention is how long a node keeps the first response
// to a request with an Idempotency-Key, to answer its repeats, unless told
// otherwise (node.Config.IdempotencyRetention, serve
// --idempotency-retention). Clients retry for minutes; a week also covers
// an application that queued its requests through a long outage. Older
// records are deleted (store.IdempotencyPrune): without that, the table
// grew by a response for every POST of every client, forever.
const DefaultIdempotencyRetention = 7 * 24 * time.Hour

// MinIdempotencyRetention is the shortest retention a node accepts. A
// claim whose run died keeps its seed until a retry takes it over; a
// retention shorter than a client's retries (minutes), or than a claim's
// renewals failing for a while, would delete the seed of a request whose
// first run made something, and its retry would make it again.
const MinIdempotencyRetention = time.Hour

// IdempotencyStore keeps the first response to each idempotent request,
// and the claims of the requests running. store.Store satisfies it.
type IdempotencyStore interface {
	// IdempotencyGet returns the stored response for (scope, key), or an
	// error matching store.ErrNotFound.
	IdempotencyGet(ctx context.Context, scope, key string) (*store.IdempotencyRow, error)
	// IdempotencyPut stores row and ends the key's claim; an error
	// matching store.ErrConflict if (scope, key) has a response.
	IdempotencyPut(ctx context.Context, row *store.IdempotencyRow) error
	// IdempotencyClaim, IdempotencyRenew and IdempotencyRelease hold a
	// key while its request runs (store.Store).
	IdempotencyClaim(ctx context.Context, c *store.IdempotencyClaim, now time.Time) (*store.IdempotencyClaimResult, error)
	IdempotencyRenew(ctx context.Context, scope, key, token string, expiresAt time.Time) error
	IdempotencyRelease(ctx context.Context, scope, key, token string, drop bool, now time.Time) error
}

const (
	idempotencyKeyHeader = "Idempotency-Key"
	// replayedHeader marks a response that was replayed from the record.
	replayedHeader       = "Idempotent-Replayed"
	maxIdempotencyKeyLen = 255
)

// idempotent wraps a POST handler that creates or decides. Without an
// Idempotency-Key header it just runs h. With one, the request's scope is
// its method, route pattern and path values; if (scope, key) has a record
// with the same body SHA-256, the recorded status and body are replayed; a
// record with another body is a 409; otherwise h runs, its response is
// captured, and a 2xx is recorded before it is sent.
//
// A request runs on one node at a time: before h, it claims its key in the
// store (store.IdempotencyClaim), and a request of the same key meeting the
// claim on another node is answered 409 with Retry-After (on this one, it
// waits for the first and replays it). The claim's seed names what h
// creates (app.WithCreationSeed): a node that dies between h's commit and
// the record leaves a claim that expires (Config.IdempotencyClaimTTL, or
// at the node's next start), and the client's retry runs h again with that
// seed, which finds what the first run made or journaled rather than doing
// it again (internal/engine, creationseed.go).
func (s *Server) idempotent(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		body, err := readBody(r)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		key, err := idempotencyKey(r)
		if err != nil {
			return err
		}
		if key == "" {
			return h(w, r)
		}
		scope := idempotencyScope(r)
		sum := sha256.Sum256(body)
		bodySum := hex.EncodeToString(sum[:])
		ctx := r.Context()

		unlock, err := s.idemLocks.lock(ctx, scope+"\x00"+key)
		if err != nil {
			return fmt.Errorf("wait for idempotency key: %w", err)
		}
		defer unlock()

		if done, err := s.replay(ctx, w, scope, key, bodySum); done || err != nil {
			return err
		}
		claim, fresh, err := s.claim(ctx, w, scope, key, bodySum)
		if claim == nil || err != nil {
			return err
		}
		release := func(drop bool) {
			if err := s.idem.IdempotencyRelease(context.WithoutCancel(ctx), scope, key, claim.Token, drop, s.cfg.Now().UTC()); err != nil {
				// It expires by itself.
				s.log.Warn("release idempotency claim", "scope", scope, "error", err, "request_id", requestID(r))
			}
		}
		rec := newCapture()
		err = s.runClaimed(ctx, claim, release, func() error {
			return h(rec, r.WithContext(app.WithCreationSeed(ctx, claim.Seed, !fresh)))
		})
		if err != nil || rec.status < 200 || rec.status > 299 {
			// A refusal (4xx) of the claim's first run wrote nothing:
			// the key is free for another body. Anything else may have
			// written, and so may a first run a retry took the claim
			// over from: the key is left to a retry of this body, with
			// the claim's seed.
			status := rec.status
			if err != nil {
				status = apierror.From(err).Status
			}
			release(fresh && status >= 400 && status <= 499)
			if err != nil {
				return err
			}
			rec.sendTo(w)
			return nil
		}
		row := &store.IdempotencyRow{
			Scope:      scope,
			Key:        key,
			BodySHA256: bodySum,
			Status:     rec.status,
			Response:   rec.body.Bytes(),
			CreatedAt:  s.cfg.Now().UTC(),
		}
		// The work is done: record it even if the client has gone, so its
		// retry replays instead of running again.
		putErr := s.idem.IdempotencyPut(context.WithoutCancel(ctx), row)
		switch {
		case putErr == nil:
		case errors.Is(putErr, store.ErrConflict):
			// Recorded meanwhile by a node of the previous release,
			// which claims nothing (or by a run that outlived its claim).
			s.log.Warn("idempotent request ran on two servers at once; answering with the first response",
				"scope", scope, "request_id", requestID(r))
			if done, err := s.replay(context.WithoutCancel(ctx), w, scope, key, bodySum); done || err != nil {
				return err
			}
		default:
			// The operation succeeded; failing the response would invite a
			// retry, which runs again at once with the claim's seed (that
			// finds what this run made) rather than meeting the claim.
			s.log.Error("record idempotent response", "scope", scope, "error", putErr, "request_id", requestID(r))
			release(false)
		}
		rec.sendTo(w)
		return nil
	}
}

// claim holds (scope, key) in the store for this request, or answers why
// it may not run: the key's response (replayed, or a 409 for another body),
// or another run's claim (a 409 to retry later). A nil claim with a nil
// error means the answer is written. fresh is whether the claim is new
// (its seed this call's), not one taken over from an earlier run of the
// request, which may have made something.
func (s *Server) claim(ctx context.Context, w http.ResponseWriter, scope, key, bodySum string) (c *store.IdempotencyClaim, fresh bool, err error) {
	now := s.cfg.Now().UTC()
	seed := strings.ToLower(ulid.MustNew(ulid.Timestamp(now), rand.Reader).String())
	res, err := s.idem.IdempotencyClaim(ctx, &store.IdempotencyClaim{
		Scope: scope, Key: key, BodySHA256: bodySum, Seed: seed,
		Token:     rand.Text(),
		Owner:     s.cfg.NodeID,
		ExpiresAt: now.Add(s.cfg.IdempotencyClaimTTL),
		CreatedAt: now,
	}, now)
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("claim idempotency key: %w", err)
	case res.Record != nil:
		if res.Record.BodySHA256 != bodySum {
			return nil, false, differentBody(key)
		}
		w.Header().Set(replayedHeader, "true")
		writeJSONBytes(w, res.Record.Status, res.Record.Response)
		return nil, false, nil
	case res.Held != nil:
		if res.Held.BodySHA256 != bodySum {
			return nil, false, differentBody(key)
		}
		retry := max(1, int(math.Ceil(res.Held.ExpiresAt.Sub(now).Seconds())))
		retry = min(retry, int(math.Ceil(s.cfg.IdempotencyClaimTTL.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(retry))
		return nil, false, apierror.Conflict("a request with Idempotency-Key %s is running (on another server, or on one that stopped): retry it later", quoteField(key))
	case res.Claimed != nil:
		return res.Claimed, res.Claimed.Seed == seed, nil
	}
	return nil, false, errors.New("claim idempotency key: the store answered nothing")
}

// runClaimed runs h while c is renewed. A panic of h releases c (keeping
// its seed: h may have written) before it goes on up, so that the key is
// not held by a renewal nobody stops.
func (s *Server) runClaimed(ctx context.Context, c *store.IdempotencyClaim, release func(drop bool), h func() error) error {
	stopRenewing := s.renewClaim(ctx, c)
	defer func() {
		stopRenewing()
		if p := recover(); p != nil {
			release(false)
			panic(p)
		}
	}()
	return h()
}

func differentBody(key string) error {
	return apierror.Conflict("Idempotency-Key %s was already used with a different request body", quoteField(key))
}

// renewClaim keeps c live while its request runs, every third of its TTL,
// until the returned stop is called. A renewal that fails is retried at
// the next tick: the claim may expire meanwhile, and a retry elsewhere
// then runs with the same seed.
func (s *Server) renewClaim(ctx context.Context, c *store.IdempotencyClaim) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(s.cfg.IdempotencyClaimTTL/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				err := s.idem.IdempotencyRenew(ctx, c.Scope, c.Key, c.Token, s.cfg.Now().UTC().Add(s.cfg.IdempotencyClaimTTL))
				if err != nil && ctx.Err() == nil {
					s.log.Warn("renew idempotency claim", "scope", c.Scope, "error", err)
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// replay answers from the record of (scope, key) if there is one: the
// recorded response for the same body, a 409 for another. done is false
// when there is no record.
func (s *Server) replay(ctx context.Context, w http.ResponseWriter, scope, key, bodySum string) (done bool, err error) {
	row, err := s.idem.IdempotencyGet(ctx, scope, key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read idempotency record: %w", err)
	}
	if row.BodySHA256 != bodySum {
		return false, differentBody(key)
	}
	w.Header().Set(replayedHeader, "true")
	writeJSONBytes(w, row.Status, row.Response)
	return true, nil
}

// idempotencyKey returns the request's Idempotency-Key ("" if none), which
// must be 1 to 255 printable ASCII characters and given once.
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values(idempotencyKeyHeader)
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) > 1:
		return "", apierror.Invalid(idempotencyKeyHeader, "header %s is given %d times", idempotencyKeyHeader, len(vals))
	}
	key := vals[0]
	if key == "" || len(key) > maxIdempotencyKeyLen {
		return "", apierror.Invalid(idempotencyKeyHeader, "header %s must be 1 to %d characters long", idempotencyKeyHeader, maxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", apierror.Invalid(idempotencyKeyHeader, "header %s must be printable ASCII", idempotencyKeyHeader)
		}
	}
	return key, nil
}

// idempotencyScope is the caller, the method and route pattern with the
// request's path values, e.g. "key_01… POST /v1/sessions/{id}/turns
// id=ses_1": the same key on another session (or another endpoint) is
// another request, and so is the same key from another caller: a replay
// answers what the first request answered, which another key (of another
// project, or role) must not read, nor block by taking a key first.
func idempotencyScope(r *http.Request) string {
	var b strings.Builder
	c, _ := app.CallerFrom(r.Context())
	if c.KeyID != "" {
		b.WriteString(c.KeyID)
	} else {
		// A caller without a stored key: a bootstrap key, the local
		// caller, a built-in one; each its own scope.
		b.WriteString("builtin:" + url.PathEscape(c.Name))
	}
	b.WriteString(" ")
	b.WriteString(r.Pattern)
	for _, name := range wildcardNames(r.Pattern) {
		b.WriteString(" ")
		b.WriteString(name)
		b.WriteString("=")
		b.WriteString(url.PathEscape(r.PathValue(name)))
	}
	return b.String()
}

// wildcardNames returns the {name} and {name...} wildcards of a ServeMux
// pattern, in order.
func wildcardNames(pattern string) []string {
	var names []string
	for {
		open := strings.IndexByte(pattern, '{')
		if open < 0 {
			return names
		}
		end := strings.IndexByte(pattern[open:], '}')
		if end < 0 {
			return names
		}
		name := strings.TrimSuffix(pattern[open+1:open+end], "...")
		if name != "$" {
			names = append(names, name)
		}
		pattern = pattern[open+end+1:]
	}
}

// capture is a ResponseWriter that holds a response until it is recorded.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newCapture() *capture { return &capture{header: make(http.Header)} }

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(p)
}

func (c *capture) headerWritten() bool { return c.status != 0 }

// sendTo writes the captured response to w.
func (c *capture) sendTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range c.header {
		h[k] = v
	}
	status := c.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(c.body.Bytes())
}

// keyedMutex is a set of mutexes by key, created on demand and dropped when
// nobody holds or waits for them.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	sem  chan struct{} // capacity 1: holding the lock is having sent
	refs int           // holders and waiters
}

// lock acquires key's mutex, or returns ctx's error if ctx ends first.
func (k *keyedMutex) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	l := k.m[key]
	if l == nil {
		l = &keyedLock{sem: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()

	select {
	case l.sem <- struct{}{}:
		return func() {
			<-l.sem
			k.release(key, l)
		}, nil
	case <-ctx.Done():
		k.release(key, l)
		return nil, ctx.Err()
	}
}

func (k *keyedMutex) release(key string, l *keyedLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(k.m, key)
	}
}
