package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults for the zero fields of Config.
const (
	DefaultUserAgent         = "longhaul-go-client"
	DefaultMaxRetries        = 4
	DefaultMinBackoff        = 250 * time.Millisecond
	DefaultMaxBackoff        = 10 * time.Second
	DefaultStreamIdleTimeout = 45 * time.Second
)

// Config tunes a Client. A nil *Config, and every zero field, means the
// default named in the field's comment.
type Config struct {
	// HTTPClient sends every request. Default: a client with no overall
	// Timeout, because an event stream stays open for hours; bound single
	// calls with their ctx instead. A Timeout set here also cuts each stream
	// connection, which StreamEvents then resumes.
	HTTPClient *http.Client
	// APIKey is sent as "Authorization: Bearer <APIKey>". Default: none (a
	// server without keys accepts loopback requests only).
	APIKey string
	// UserAgent is sent with every request. Default: DefaultUserAgent.
	UserAgent string

	// MaxRetries is how many times one call is retried after a transient
	// failure (connection refused or reset, 429, 502, 503, 504). Default:
	// DefaultMaxRetries; a negative value disables retries. Retrying a POST
	// is safe because each call carries one Idempotency-Key on all attempts.
	MaxRetries int
	// MinBackoff is the delay before the first retry; each further retry
	// doubles it, up to MaxBackoff, with jitter. Default: DefaultMinBackoff.
	MinBackoff time.Duration
	// MaxBackoff caps one retry delay, including the reconnect delay of
	// StreamEvents and a server's Retry-After. Default: DefaultMaxBackoff.
	MaxBackoff time.Duration
	// StreamIdleTimeout is how long StreamEvents waits for any byte (an
	// event or a ping; the server pings at least every 15 s) before it
	// drops the connection and resumes on a new one. Default:
	// DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration

	// Sleep waits out one backoff delay, returning early with ctx's error
	// when ctx ends. Default: a timer. Tests inject one that returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now and After are the clock of the stream's idle watchdog. Default:
	// time.Now and time.After. Tests inject a manual clock.
	Now   func() time.Time
	After func(d time.Duration) <-chan time.Time
}

// Client calls Longhaul's HTTP API. It is safe for concurrent use.
type Client struct {
	base        *url.URL
	http        *http.Client
	apiKey      string
	userAgent   string
	maxRetries  int
	minBackoff  time.Duration
	maxBackoff  time.Duration
	idleTimeout time.Duration
	sleep       func(ctx context.Context, d time.Duration) error
	now         func() time.Time
	after       func(d time.Duration) <-chan time.Time
}

// New returns a client for the server at baseURL (for example
// "http://127.0.0.1:8080"; a path prefix such as "https://host/longhaul" is
// kept). cfg may be nil.
func New(baseURL string, cfg *Config) (*Client, error) {
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	c := &Client{
		base:        base,
		http:        cfg.HTTPClient,
		apiKey:      cfg.APIKey,
		userAgent:   cfg.UserAgent,
		maxRetries:  cfg.MaxRetries,
		minBackoff:  cfg.MinBackoff,
		maxBackoff:  cfg.MaxBackoff,
		idleTimeout: cfg.StreamIdleTimeout,
		sleep:       cfg.Sleep,
		now:         cfg.Now,
		after:       cfg.After,
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.userAgent == "" {
		c.userAgent = DefaultUserAgent
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	if c.minBackoff == 0 {
		c.minBackoff = DefaultMinBackoff
	}
	if c.maxBackoff == 0 {
		c.maxBackoff = DefaultMaxBackoff
	}
	if c.minBackoff > c.maxBackoff {
		return nil, fmt.Errorf("new client: Config.MinBackoff %s is above Config.MaxBackoff %s", c.minBackoff, c.maxBackoff)
	}
	if c.idleTimeout == 0 {
		c.idleTimeout = DefaultStreamIdleTimeout
	}
	if c.sleep == nil {
		c.sleep = sleepTimer
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.after == nil {
		c.after = time.After
	}
	return c, nil
}

func (cfg *Config) validate() error {
	if cfg.MinBackoff < 0 {
		return fmt.Errorf("Config.MinBackoff %s is negative", cfg.MinBackoff)
	}
	if cfg.MaxBackoff < 0 {
		return fmt.Errorf("Config.MaxBackoff %s is negative", cfg.MaxBackoff)
	}
	if cfg.StreamIdleTimeout < 0 {
		return fmt.Errorf("Config.StreamIdleTimeout %s is negative", cfg.StreamIdleTimeout)
	}
	if strings.ContainsAny(cfg.APIKey, "\r\n") {
		return errors.New("Config.APIKey contains a line break")
	}
	if strings.ContainsAny(cfg.UserAgent, "\r\n") {
		return errors.New("Config.UserAgent contains a line break")
	}
	return nil
}

func parseBaseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("baseURL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("baseURL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("baseURL %q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("baseURL %q: host is empty", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("baseURL %q: credentials belong in Config.APIKey, not the URL", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("baseURL %q: must not have a query or a fragment", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	return u, nil
}

// endpoint builds the URL of the path made of segments, each escaped, under
// the base URL. Escaping each id keeps a "/" or "?" in an id from reaching
// another route.
func (c *Client) endpoint(query url.Values, segments ...string) string {
	var b strings.Builder
	b.WriteString(c.base.String())
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	if len(query) > 0 {
		b.WriteByte('?')
		b.WriteString(query.Encode())
	}
	return b.String()
}

// call is one logical API call, which may take several attempts.
type call struct {
	method string
	url    string
	body   any // marshalled as JSON when non-nil
	// raw, when non-nil, is sent as is with Content-Type rawType (a file
	// upload) instead of body.
	raw     []byte
	rawType string
	accept  string
	// ifMatch, when not empty, is sent as If-Match (a conditional change).
	ifMatch string
	// noRetry marks probes (healthz, readyz) whose answer is the status
	// itself, and calls the server does not replay (POST /v1/keys: a retry
	// after a lost answer would make a second key).
	noRetry bool
}

// response is a complete 2xx response.
type response struct {
	status int
	header http.Header
	body   []byte
}

// send performs c with retries of transient failures and returns the 2xx
// response, an *APIError for any other status, or the transport error.
func (c *Client) send(ctx context.Context, cl *call) (*response, error) {
	var body []byte
	if cl.body != nil {
		var err error
		if body, err = json.Marshal(cl.body); err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
	}
	if cl.raw != nil {
		body = cl.raw
	}
	var key string
	if cl.method == http.MethodPost {
		var err error
		if key, err = idempotencyKey(ctx); err != nil {
			return nil, err
		}
	}
	retries := c.maxRetries
	if cl.noRetry {
		retries = 0
	}
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, cl, body, key)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil || attempt > retries || !retryable(err) {
			if attempt > 1 {
				return nil, fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			return nil, err
		}
		d := c.backoff(attempt)
		if ra := retryAfter(err); ra > 0 {
			d = min(ra, c.maxBackoff)
		}
		if err := c.sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// attempt sends one request and reads its whole response.
func (c *Client) attempt(ctx context.Context, cl *call, body []byte, key string) (*response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, cl.url, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	c.setHeaders(req)
	if cl.raw != nil {
		req.Header.Set("Content-Type", cl.rawType)
	} else if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.ifMatch != "" {
		req.Header.Set("If-Match", cl.ifMatch)
	}
	accept := cl.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newAPIError(resp.StatusCode, resp.Header, data)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

func (c *Client) setHeaders(req *http.Request) {
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
}

// doJSON performs a call and decodes a 2xx JSON body into out (when non-nil).
func (c *Client) doJSON(ctx context.Context, cl *call, out any) error {
	resp, err := c.send(ctx, cl)
	if err != nil {
		return err
	}
	if out == nil || resp.status == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("decode response (status %d): %w", resp.status, err)
	}
	return nil
}

// backoff is the delay before retry number attempt (1-based): MinBackoff
// doubled per attempt, capped at MaxBackoff, with "equal jitter" (a random
// point in the upper half) so that many clients cut off by one server restart
// do not reconnect in lockstep.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.minBackoff
	for i := 1; i < attempt && d < c.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.maxBackoff)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// retryable reports whether err is a transient failure that another attempt
// of the same request may not meet.
func retryable(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		case http.StatusConflict:
			// The one 409 with a Retry-After: the same Idempotency-Key
			// is running elsewhere (another node took the same call, or
			// one died running it). Its answer comes to a retry.
			return ae.header.Get("Retry-After") != ""
		}
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		// Nothing reached the server; covers refused and unreachable.
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// retryAfter is the server's Retry-After (in seconds) of an *APIError, or 0.
func retryAfter(err error) time.Duration {
	var ae *APIError
	if !errors.As(err, &ae) || ae.header == nil {
		return 0
	}
	s, err := strconv.Atoi(strings.TrimSpace(ae.header.Get("Retry-After")))
	if err != nil || s <= 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

func sleepTimer(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// requireID returns an error naming field when an id that goes into a path
// is empty: "/v1/sessions/" would silently reach another route.
func requireID(field, value string) error {
	if value == "" {
		return fmt.Errorf("%s is empty", field)
	}
	return nil
}

// Health calls GET /healthz: nil when the server process is alive.
func (c *Client) Health(ctx context.Context) error {
	if _, err := c.send(ctx, &call{method: http.MethodGet, url: c.endpoint(nil, "healthz"), noRetry: true}); err != nil {
		return fmt.Errorf("health: %w", err)
	}
	return nil
}

// Ready calls GET /readyz: nil when the server's storage is reachable and
// migrated. A probe is not retried: its answer is the status itself.
func (c *Client) Ready(ctx context.Context) error {
	if _, err := c.send(ctx, &call{method: http.MethodGet, url: c.endpoint(nil, "readyz"), noRetry: true}); err != nil {
		return fmt.Errorf("ready: %w", err)
	}
	return nil
}
