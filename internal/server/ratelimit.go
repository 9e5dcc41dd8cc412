package server

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Per-key rate limits (serve --rate-limit). Each caller has a token bucket
// per route class: a key by its id, a bootstrap or local identity by its
// name, and a request that authenticated as no one by its peer's IP
// address, so that a flood of bad keys is limited too (its refusals become
// 429s once its address's bucket is empty; a valid key sent from that
// address is not held back by them).
// The buckets live in this process: each node limits on its own, and N
// nodes behind a balancer let through up to N times a limit.

// The route classes a limit applies to.
const (
	// ClassRead is every GET (and HEAD) but the event streams.
	ClassRead = "read"
	// ClassWrite is every POST, PUT, PATCH and DELETE.
	ClassWrite = "write"
	// ClassStream is opening an event stream (a GET that lasts).
	ClassStream = "stream"
)

// RouteClasses lists the classes a RateLimits spec may name.
func RouteClasses() []string { return []string{ClassRead, ClassWrite, ClassStream} }

// Rate is a class's limit: Limit requests per second on average, in
// bursts of up to Burst.
type Rate struct {
	Limit rate.Limit
	Burst int
}

// RateLimits maps a route class to its limit; a class it does not name is
// not limited.
type RateLimits map[string]Rate

// DefaultMaxLimiters bounds how many buckets (caller × class) a server
// keeps; see limiters.sweep.
const DefaultMaxLimiters = 10000

// ParseRateLimits reads a spec: comma-separated CLASS=N/UNIT[:BURST], where
// CLASS is read, write or stream, N a positive whole number of requests,
// UNIT s, m or h, and BURST (default N) how many may come at once:
// "read=100/s,write=20/s:40,stream=10/m". An empty spec limits nothing.
func ParseRateLimits(spec string) (RateLimits, error) {
	out := RateLimits{}
	if strings.TrimSpace(spec) == "" {
		return out, nil
	}
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		class, r, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("rate limit %q: want CLASS=N/UNIT[:BURST], e.g. read=100/s", item)
		}
		class = strings.TrimSpace(class)
		if !slices.Contains(RouteClasses(), class) {
			return nil, fmt.Errorf("rate limit %q: the class must be one of %s", item, strings.Join(RouteClasses(), ", "))
		}
		if _, dup := out[class]; dup {
			return nil, fmt.Errorf("rate limit %q: the class %s is given twice", item, class)
		}
		rt, err := parseRate(strings.TrimSpace(r))
		if err != nil {
			return nil, fmt.Errorf("rate limit %q: %w", item, err)
		}
		out[class] = rt
	}
	return out, nil
}

// parseRate reads N/UNIT[:BURST].
func parseRate(s string) (Rate, error) {
	s, burstText, hasBurst := strings.Cut(s, ":")
	count, unit, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, errors.New("want N/UNIT, e.g. 100/s")
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		return Rate{}, fmt.Errorf("the count must be a whole number of at least 1, got %q", count)
	}
	per, ok := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	if !ok {
		return Rate{}, fmt.Errorf("the unit must be s, m or h, got %q", unit)
	}
	burst := n
	if hasBurst {
		if burst, err = strconv.Atoi(burstText); err != nil || burst < 1 {
			return Rate{}, fmt.Errorf("the burst must be a whole number of at least 1, got %q", burstText)
		}
	}
	return Rate{Limit: rate.Limit(float64(n) / per.Seconds()), Burst: burst}, nil
}

// limiters holds the buckets. The zero of its map is no limiter yet; a
// nil *limiters limits nothing.
type limiters struct {
	rates RateLimits
	max   int

	mu sync.Mutex
	m  map[limiterKey]*rate.Limiter
}

type limiterKey struct{ who, class string }

func newLimiters(rates RateLimits, maxLimiters int) *limiters {
	if len(rates) == 0 {
		return nil
	}
	return &limiters{rates: rates, max: cmp.Or(maxLimiters, DefaultMaxLimiters), m: map[limiterKey]*rate.Limiter{}}
}

// take spends a token of who's bucket for class at now and returns 0, or,
// when the bucket is empty, spends nothing and returns how long until a
// token is there.
func (l *limiters) take(who, class string, now time.Time) time.Duration {
	lim := l.get(who, class, now, true)
	if lim == nil {
		return 0
	}
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return time.Duration(math.MaxInt64)
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// get returns who's bucket for class (nil if the class is not limited, or
// if there is none and create is false).
func (l *limiters) get(who, class string, now time.Time, create bool) *rate.Limiter {
	rt, ok := l.rates[class]
	if !ok {
		return nil
	}
	k := limiterKey{who, class}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.m[k]
	if lim == nil && create {
		if len(l.m) >= l.max {
			l.sweep(now)
		}
		lim = rate.NewLimiter(rt.Limit, rt.Burst)
		l.m[k] = lim
	}
	return lim
}

// sweep bounds the memory the buckets take. A bucket that has refilled is
// the same as a new one, so it goes first at no cost; if that is not
// enough, the buckets of addresses go (their callers start again from a
// full bucket), arbitrary ones until half the room is free, and only then
// those of keys and names. Addresses are what an attacker can make many
// of; keys are made by an admin: a flood from many addresses must not
// refill a drained key's bucket by pushing it out.
func (l *limiters) sweep(now time.Time) {
	for k, lim := range l.m {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(l.m, k)
		}
	}
	for _, addresses := range []bool{true, false} {
		for k := range l.m {
			if len(l.m) < l.max/2 {
				return
			}
			if strings.HasPrefix(k.who, addressPrefix) == addresses {
				delete(l.m, k)
			}
		}
	}
}

// size is how many buckets l holds.
func (l *limiters) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// routeClass is the class of the request r: a stream for the routes of
// StreamEvents and StreamTreeEvents and a runner's connection, a write for an unsafe method, a read
// otherwise.
func (s *Server) routeClass(r *http.Request) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return ClassWrite
	}
	if _, pattern := s.mux.Handler(r); strings.HasSuffix(pattern, "/stream") || pattern == runnerConnectPattern {
		return ClassStream
	}
	return ClassRead
}

// limitKey is who a request counts against: its key's id, a bootstrap or
// local identity's name, or (c nil: no one authenticated) its peer's
// address.
func limitKey(r *http.Request, c *app.Caller) string {
	switch {
	case c == nil:
		return addressPrefix + addressBucket(remoteIP(r))
	case c.KeyID != "":
		return "key:" + c.KeyID
	default:
		return "name:" + c.Name
	}
}

// addressPrefix starts the bucket key of a request that authenticated as
// no one.
const addressPrefix = "ip:"

// addressBucket is the part of a peer's address its bucket is for: an IPv4
// address whole, an IPv6 address's /64 network, the smallest block a
// host is commonly given (one host holds a whole /64, and would otherwise
// get a fresh bucket for each of its addresses).
func addressBucket(host string) string {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	return netip.PrefixFrom(ip.WithZone(""), 64).Masked().String()
}

// remoteIP is the host part of r.RemoteAddr (all of it when it has no
// port).
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// rateLimited is the 429 of a request over its limit, with Retry-After
// (whole seconds, rounded up) set on w.
func rateLimited(w http.ResponseWriter, who string, wait time.Duration) error {
	secs := int64(math.Ceil(wait.Seconds()))
	if wait >= time.Duration(math.MaxInt64) || secs > 86400 {
		secs = 86400
	}
	secs = max(secs, 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	return &apierror.Error{Status: http.StatusTooManyRequests, Code: lt.CodeRateLimited,
		Message: fmt.Sprintf("rate limit exceeded for %s: retry in %d s", who, secs)}
}

// limitRefused spends a token of the address's bucket for a request that
// authentication refused (401, 403), and turns the refusal into a 429
// once the bucket is empty. Only refused requests spend it, and it is
// never checked before authentication: a client guessing keys from an
// address (a proxy's, which every user of single sign-on shares) must not
// lock out the valid keys that come from it.
func (s *Server) limitRefused(w http.ResponseWriter, r *http.Request, err error) error {
	if s.limits == nil {
		return err
	}
	if st := apierror.From(err).Status; st == http.StatusUnauthorized || st == http.StatusForbidden {
		if wait := s.limits.take(limitKey(r, nil), s.routeClass(r), s.cfg.Now()); wait > 0 {
			return rateLimited(w, "this address", wait)
		}
	}
	return err
}

// limitCaller spends a token of c's bucket for r's class, or refuses r
// with a 429.
func (s *Server) limitCaller(w http.ResponseWriter, r *http.Request, c app.Caller) error {
	if s.limits == nil {
		return nil
	}
	if wait := s.limits.take(limitKey(r, &c), s.routeClass(r), s.cfg.Now()); wait > 0 {
		return rateLimited(w, "this key", wait)
	}
	return nil
}
