package tool

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/httpretry"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// http_request defaults and limits.
const (
	// DefaultHTTPTimeout bounds a request, redirects and body included, when
	// neither the arguments nor the call say otherwise.
	DefaultHTTPTimeout = 30 * time.Second
	// MaxHTTPTimeoutSeconds is the largest timeout_seconds a model may ask
	// for.
	MaxHTTPTimeoutSeconds = 600
	// DefaultHTTPMaxBody is how much of a response body is returned when the
	// call sets no output bound.
	DefaultHTTPMaxBody = 256 << 10
	// MaxHTTPRedirects is how many redirects one call follows.
	MaxHTTPRedirects = 5

	maxHTTPResponseHeaderBytes = 64 << 10
	httpUserAgent              = "longhaul-http_request"
)

// NoNetworkError is the error of http_request in a session whose agent lists
// no hosts.
const NoNetworkError = "no network: the agent's environment lists no hosts"

var httpRequestSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
      "description": "HTTP method."},
    "url": {"type": "string", "minLength": 1, "maxLength": 8192,
      "description": "Absolute http:// or https:// URL; the host must be in the agent's network allowlist."},
    "headers": {"type": "object", "additionalProperties": {"type": "string"},
      "description": "Request headers. Credentials configured for the host are added by the server and override headers of the same name."},
    "body": {"type": "string", "description": "Request body (Content-Type defaults to application/json when the body is JSON, text/plain otherwise)."},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 600,
      "description": "Give up after this many seconds (default 30)."}
  },
  "required": ["method", "url"],
  "additionalProperties": false
}`)

// HTTPRequest is the http_request built-in. It runs in the server, outside
// any sandbox, so it can add credentials the sandbox never sees. The zero
// value is ready to use.
//
// Every connection goes through egress.Policy.Dial with the session's
// allowlist (Call.Network): unlisted hosts, unlisted IP literals and names
// that resolve to private, loopback or metadata addresses are refused, the
// same rule as the sandbox's egress proxy. A nil Call.Network refuses every
// request. HTTPS keeps normal certificate verification against the URL's
// host name.
//
// Credentials from Call.Secrets.ForHost(host) are set as headers on requests
// to that host, overriding headers of the same name. Redirects (at most
// MaxHTTPRedirects) are followed by the tool itself, each hop checked by the
// policy; once a redirect leaves the original host, or goes from https to
// http, no credential is sent again, nor the model's Authorization,
// Cookie or credential-named headers. Injected values are also masked in
// the output, as a second line behind the engine's redaction.
//
// Its effect class depends on the call: Effect returns irreversible, and the
// engine classifies each call with HTTPRequestEffect (GET and HEAD read;
// other methods irreversible, or idempotent when the agent declares the
// endpoint so). An idempotent call sends Call.IdempotencyKey as the
// Idempotency-Key header, so the remote side can recognise a re-run.
//
// A response is an output whatever its status; 429, 502, 503 and 504 are
// also transient errors (with Retry-After), as are timeouts and reset or
// refused connections. A refused destination is a plain error.
type HTTPRequest struct {
	// Egress is how requests reach the network: resolver, dialer, allowed
	// ports (see egress.Config; default the system resolver, a dialer with
	// timeouts and ports 80 and 443).
	Egress egress.Config
	// TLSConfig, if set, is cloned for HTTPS connections (to trust a private
	// CA). Nil: the system roots. The server name is always the URL's host.
	TLSConfig *tls.Config
	// Now is the clock Retry-After dates are measured with (default
	// time.Now).
	Now func() time.Time
}

// HTTPRequestOutput is the output of http_request.
type HTTPRequestOutput struct {
	Status int `json:"status"`
	// URL is the URL that answered, after redirects.
	URL string `json:"url"`
	// Redirects is how many redirects were followed.
	Redirects int `json:"redirects,omitempty"`
	// Headers is a safe subset of the response headers (content, caching,
	// location and rate-limit headers; never Set-Cookie).
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the response body as text, or base64 when Encoding is
	// "base64" (the bytes are not UTF-8).
	Body     string `json:"body"`
	Encoding string `json:"encoding,omitempty"`
	// Truncated is true when the body went on past the returned bytes.
	Truncated bool `json:"truncated"`
	// Credentials names the secrets that were injected.
	Credentials []string `json:"credentials,omitempty"`
}

// HTTPRequestEffect is the effect class of one http_request call: GET and
// HEAD read; any other method irreversible, unless idempotent (the agent
// declared the endpoint idempotent), then idempotent. Arguments that cannot
// be read are irreversible: the call will fail validation, and the cautious
// class costs nothing then.
func HTTPRequestEffect(args json.RawMessage, idempotent bool) lt.EffectClass {
	var a struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return lt.EffectIrreversible
	}
	switch a.Method {
	case http.MethodGet, http.MethodHead:
		return lt.EffectRead
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		if idempotent {
			return lt.EffectIdempotent
		}
	}
	return lt.EffectIrreversible
}

// Name implements Tool.
func (*HTTPRequest) Name() string { return "http_request" }

// Description implements Tool.
func (*HTTPRequest) Description() string {
	return "Make an HTTP request to a host in the agent's network allowlist. " +
		"Credentials configured for the host are added by the server; do not put secrets in arguments. " +
		"Returns status, selected headers and the body (binary bodies base64-encoded, long bodies truncated)."
}

// Parameters implements Tool.
func (*HTTPRequest) Parameters() json.RawMessage { return clone(httpRequestSchema) }

// Effect implements Tool. The engine refines it per call with
// HTTPRequestEffect.
func (*HTTPRequest) Effect() lt.EffectClass { return lt.EffectIrreversible }

// httpArgs are the checked arguments.
type httpArgs struct {
	method  string
	url     *url.URL
	headers http.Header
	body    string
	hasBody bool
	timeout time.Duration
}

// Run implements Tool.
func (t *HTTPRequest) Run(ctx context.Context, call *Call) (*Result, error) {
	args, res := t.parseArguments(call)
	if res != nil {
		return res, nil
	}
	emit := func(ev egress.Event) {
		ev.Via = "http_request"
		if call.OnNetwork != nil {
			call.OnNetwork(NetworkEvent(ev))
		}
	}
	if call.Network == nil {
		emit(egress.Event{Host: args.url.Hostname(), Port: urlPort(args.url), Reason: "no network"})
		return &Result{Error: NoNetworkError}, nil
	}
	policy, err := egress.NewPolicy(call.Network.Allow)
	if err != nil {
		return nil, fmt.Errorf("http_request: %w", err)
	}
	cfg := t.Egress
	if len(call.Network.Ports) > 0 {
		cfg.Ports = call.Network.Ports
	}
	if call.Network.ControlPlane != nil {
		cfg.ControlPlane = call.Network.ControlPlane
	}
	if policy, err = policy.WithConfig(cfg); err != nil {
		return nil, fmt.Errorf("http_request: %w", err)
	}

	transport := &http.Transport{
		Proxy: nil, // the policy decides where to connect; no proxy in between
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, portStr, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("dial %s: %w", addr, err)
			}
			port, err := strconv.Atoi(portStr)
			if err != nil {
				return nil, fmt.Errorf("dial %s: bad port", addr)
			}
			conn, ev, err := policy.Dial(ctx, network, host, port)
			emit(ev)
			return conn, err
		},
		MaxResponseHeaderBytes: maxHTTPResponseHeaderBytes,
		TLSHandshakeTimeout:    10 * time.Second,
	}
	if t.TLSConfig != nil {
		transport.TLSClientConfig = t.TLSConfig.Clone()
	}
	defer transport.CloseIdleConnections()

	runCtx, cancel := context.WithTimeout(ctx, args.timeout)
	defer cancel()
	ex := &httpExchange{tool: t, call: call, args: args, transport: transport}
	out, res, err := ex.do(runCtx)
	if err != nil {
		return nil, err
	}
	if res != nil {
		switch {
		case ctx.Err() != nil:
			res = &Result{Error: "request cancelled: " + context.Cause(ctx).Error()}
		case runCtx.Err() != nil:
			res = &Result{Error: "request timed out after " + formatSeconds(args.timeout), Transient: true}
		}
		return res, nil
	}
	return t.result(out, ex.retryAfter), nil
}

// result turns a response into the call's result: a 429 or a gateway
// failure is also a transient error, the response kept as output.
func (t *HTTPRequest) result(out *HTTPRequestOutput, retryAfter string) *Result {
	res := &Result{Output: out}
	switch out.Status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		res.Error = fmt.Sprintf("HTTP %d %s", out.Status, http.StatusText(out.Status))
		res.Transient = true
		res.RetryAfter = t.parseRetryAfter(retryAfter)
	}
	return res
}

// parseRetryAfter reads delay-seconds or an HTTP date; anything else, or a
// time in the past, is no wait.
func (t *HTTPRequest) parseRetryAfter(v string) time.Duration {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	return min(httpretry.Value(v, now()), 24*time.Hour)
}

func (t *HTTPRequest) parseArguments(call *Call) (*httpArgs, *Result) {
	var raw struct {
		Method         string            `json:"method"`
		URL            string            `json:"url"`
		Headers        map[string]string `json:"headers"`
		Body           *string           `json:"body"`
		TimeoutSeconds json.Number       `json:"timeout_seconds"`
	}
	if res := decodeArguments(t, call, &raw); res != nil {
		return nil, res
	}
	fail := func(field, msg string) (*httpArgs, *Result) {
		return nil, &Result{Error: docArguments + "." + field + ": " + msg}
	}
	u, err := url.Parse(raw.URL)
	if err != nil {
		return fail("url", "is not a URL: "+strings.TrimPrefix(err.Error(), "parse "))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fail("url", "must be an http:// or https:// URL")
	}
	if u.User != nil {
		return fail("url", "must not contain user information (credentials are configured as secrets)")
	}
	if u.Hostname() == "" {
		return fail("url", "has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fail("url", "has an invalid port "+strconv.Quote(p))
		}
	}
	u.Fragment, u.RawFragment = "", ""

	a := &httpArgs{method: raw.Method, url: u, headers: make(http.Header)}
	names := make([]string, 0, len(raw.Headers))
	for name := range raw.Headers {
		names = append(names, name)
	}
	slices.Sort(names) // the first problem reported is the same every time
	for _, name := range names {
		value := raw.Headers[name]
		field := "headers." + name
		if !validHeaderName(name) {
			return fail(field, "is not a valid header name")
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return fail(field, "must not contain CR, LF or NUL")
		}
		canon := http.CanonicalHeaderKey(name)
		if toolHeaders[canon] {
			return fail(field, "is set by the tool")
		}
		if a.headers.Get(canon) != "" {
			return fail(field, "is given twice (header names are case-insensitive)")
		}
		a.headers.Set(canon, value)
	}
	if raw.Body != nil {
		a.body, a.hasBody = *raw.Body, true
	}

	a.timeout = DefaultHTTPTimeout
	if call.Timeout > 0 {
		a.timeout = call.Timeout
	}
	if raw.TimeoutSeconds != "" {
		secs, err := intArgument("timeout_seconds", raw.TimeoutSeconds)
		if err != nil {
			return nil, &Result{Error: err.Error()}
		}
		a.timeout = time.Duration(secs) * time.Second
	}
	return a, nil
}

// toolHeaders are headers the model may not set: the transport writes them
// (framing, connection management, the destination), and a forged Host would
// let a request claim another site than the one the policy checked.
var toolHeaders = map[string]bool{
	"Host":                true,
	"Content-Length":      true,
	"Transfer-Encoding":   true,
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Authorization": true,
	"Proxy-Connection":    true,
	"Te":                  true,
	"Trailer":             true,
	"Upgrade":             true,
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func urlPort(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// httpExchange is one call: a request and the redirects it leads to.
type httpExchange struct {
	tool      *HTTPRequest
	call      *Call
	args      *httpArgs
	transport *http.Transport

	// injected holds the credentials sent so far, for masking the output.
	injected   []Credential
	retryAfter string
}

// do runs the request. It returns the output, or the Result of a failure the
// model should see, or a Go error when the tool could not run.
func (ex *httpExchange) do(ctx context.Context) (*HTTPRequestOutput, *Result, error) {
	origin := ex.args.url
	u := origin
	method := ex.args.method
	body, hasBody := ex.args.body, ex.args.hasBody
	// trusted stays true while every hop is on the original host without a
	// downgrade to http: only then may credentials (the vault's and the
	// model's own) be sent.
	trusted := true
	for redirects := 0; ; redirects++ {
		req, err := ex.newRequest(ctx, method, u, body, hasBody, trusted)
		if err != nil {
			return nil, nil, err
		}
		resp, err := ex.transport.RoundTrip(req)
		if err != nil {
			return nil, roundTripFailure(u, err), nil
		}
		loc := resp.Header.Get("Location")
		if !isRedirect(resp.StatusCode) || loc == "" {
			out, res := ex.readResponse(resp, u, redirects)
			return out, res, nil
		}
		drainAndClose(resp.Body)
		next, err := u.Parse(loc)
		if err != nil || (next.Scheme != "http" && next.Scheme != "https") || next.Hostname() == "" {
			return nil, &Result{Error: fmt.Sprintf("redirect from %s to an invalid location %q", u.Redacted(), ex.mask(loc))}, nil
		}
		if redirects == MaxHTTPRedirects {
			return nil, &Result{Error: fmt.Sprintf("stopped after %d redirects (last to %s)", MaxHTTPRedirects, ex.mask(next.Redacted()))}, nil
		}
		next.Fragment, next.RawFragment = "", ""
		if !strings.EqualFold(next.Hostname(), origin.Hostname()) || (u.Scheme == "https" && next.Scheme == "http") {
			trusted = false
		}
		// 301, 302 and 303 turn a POST (303: anything but HEAD) into a
		// bodiless GET, as browsers and net/http do; 307 and 308 repeat the
		// request as it was.
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound:
			if method == http.MethodPost {
				method, body, hasBody = http.MethodGet, "", false
			}
		case http.StatusSeeOther:
			if method != http.MethodHead {
				method = http.MethodGet
			}
			body, hasBody = "", false
		}
		u = next
	}
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// sensitiveHeaders are the model's headers that are not sent once a redirect
// leaves the original host (net/http drops the same on such redirects).
var sensitiveHeaders = []string{"Authorization", "Cookie", "Www-Authenticate"}

// newRequest builds one hop. Credentials are added only while trusted, and
// override the model's headers of the same name.
func (ex *httpExchange) newRequest(ctx context.Context, method string, u *url.URL, body string, hasBody, trusted bool) (*http.Request, error) {
	var rd io.Reader
	if hasBody {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("http_request: build request: %w", err)
	}
	req.Header = ex.args.headers.Clone()
	var creds []Credential
	if trusted && ex.call.Secrets != nil {
		// The port too: a secret bound to one port of a host goes to that
		// port only.
		creds = ex.call.Secrets.ForHost(net.JoinHostPort(normalizeHost(u.Hostname()), strconv.Itoa(urlPort(u))))
	}
	if !trusted {
		for _, h := range sensitiveHeaders {
			req.Header.Del(h)
		}
		// A header a credential filled on the original host may hold
		// the model's own copy of that credential.
		for _, c := range ex.injected {
			req.Header.Del(c.Header)
		}
	}
	for _, c := range creds {
		if !validHeaderName(c.Header) || strings.ContainsAny(c.Value, "\r\n\x00") {
			return nil, fmt.Errorf("http_request: secret %s: cannot be sent as header %q", c.Name, c.Header)
		}
		req.Header.Set(c.Header, c.Value)
		if !slices.ContainsFunc(ex.injected, func(o Credential) bool { return o.Name == c.Name && o.Header == c.Header }) {
			ex.injected = append(ex.injected, c)
		}
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", httpUserAgent)
	}
	if hasBody && req.Header.Get("Content-Type") == "" {
		if json.Valid([]byte(body)) {
			req.Header.Set("Content-Type", "application/json")
		} else {
			req.Header.Set("Content-Type", "text/plain; charset=utf-8")
		}
	}
	if ex.call.Effect == lt.EffectIdempotent && method != http.MethodGet && method != http.MethodHead && ex.call.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", ex.call.IdempotencyKey)
	}
	return req, nil
}

func normalizeHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// roundTripFailure is the Result of a request that got no response.
func roundTripFailure(u *url.URL, err error) *Result {
	var refused *egress.RefusedError
	if errors.As(err, &refused) {
		return &Result{Error: refused.Error()}
	}
	return &Result{Error: fmt.Sprintf("request to %s: %v", u.Redacted(), err), Transient: transientNetError(err)}
}

// transientNetError reports whether a request that failed with err may
// succeed if tried again: timeouts, reset, refused or cut connections, and
// temporary DNS failures.
func transientNetError(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTimeout || dnsErr.IsTemporary
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// readResponse reads up to the output bound of the body and builds the
// output.
func (ex *httpExchange) readResponse(resp *http.Response, u *url.URL, redirects int) (*HTTPRequestOutput, *Result) {
	defer resp.Body.Close()
	limit := DefaultHTTPMaxBody
	if ex.call.MaxOutputBytes > 0 {
		limit = ex.call.MaxOutputBytes
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, &Result{Error: fmt.Sprintf("read response body from %s: %v", u.Redacted(), err), Transient: transientNetError(err)}
	}
	truncated := len(data) > limit
	if truncated {
		data = data[:limit]
	}
	data = ex.maskBytes(data, truncated)

	out := &HTTPRequestOutput{
		Status:    resp.StatusCode,
		URL:       ex.mask(u.Redacted()),
		Redirects: redirects,
		Headers:   ex.safeHeaders(resp.Header),
		Truncated: truncated,
	}
	window := data
	if truncated {
		// The bound may cut a character in two; end before it so text
		// stays text.
		if trimmed := trimPartialRune(window); utf8.Valid(trimmed) {
			window = trimmed
		}
	}
	if utf8.Valid(window) {
		out.Body = string(window)
	} else {
		out.Body = base64.StdEncoding.EncodeToString(data)
		out.Encoding = "base64"
	}
	for _, c := range ex.injected {
		if !slices.Contains(out.Credentials, c.Name) {
			out.Credentials = append(out.Credentials, c.Name)
		}
	}
	ex.retryAfter = resp.Header.Get("Retry-After")
	return out, nil
}

// outputHeaders are the response headers the model sees: what describes the
// content, caching, where to go next and how fast it may ask again. Cookies
// and anything else are left out: they may carry session credentials.
var outputHeaders = []string{
	"Accept-Ranges", "Allow", "Cache-Control", "Content-Disposition", "Content-Encoding",
	"Content-Language", "Content-Length", "Content-Range", "Content-Type", "Date", "Etag",
	"Expires", "Last-Modified", "Link", "Location", "Request-Id", "Retry-After", "Vary",
	"Www-Authenticate", "X-Request-Id", "X-Total-Count",
}

var outputHeaderPrefixes = []string{"Ratelimit", "X-Ratelimit-", "X-Rate-Limit-"}

func (ex *httpExchange) safeHeaders(h http.Header) map[string]string {
	out := make(map[string]string)
	for name, values := range h {
		ok := slices.Contains(outputHeaders, name)
		for _, p := range outputHeaderPrefixes {
			ok = ok || strings.HasPrefix(name, p)
		}
		if ok && len(values) > 0 {
			out[name] = ex.mask(strings.Join(values, ", "))
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// secretForms returns the strings that reveal an injected credential: the
// header value, and the token after an auth scheme ("Bearer t0ken").
func (ex *httpExchange) secretForms() [][]byte {
	var forms [][]byte
	for _, c := range ex.injected {
		if c.Value == "" {
			continue
		}
		forms = append(forms, []byte(c.Value))
		if _, tok, ok := strings.Cut(c.Value, " "); ok && len(tok) >= 8 {
			forms = append(forms, []byte(tok))
		}
	}
	// Longest first, so a value is masked whole before a token inside it.
	slices.SortFunc(forms, func(a, b []byte) int { return len(b) - len(a) })
	return forms
}

const maskText = "[REDACTED]"

func (ex *httpExchange) mask(s string) string {
	if len(ex.injected) == 0 {
		return s
	}
	return string(ex.maskBytes([]byte(s), false))
}

// maskBytes replaces injected credentials in b. When b was cut short, a
// trailing piece that starts a credential is cut too.
func (ex *httpExchange) maskBytes(b []byte, cut bool) []byte {
	forms := ex.secretForms()
	for _, f := range forms {
		b = bytes.ReplaceAll(b, f, []byte(maskText))
	}
	if cut {
		for _, f := range forms {
			for k := min(len(f)-1, len(b)); k >= 4; k-- {
				if bytes.HasSuffix(b, f[:k]) {
					b = b[:len(b)-k]
					break
				}
			}
		}
	}
	return b
}

// drainAndClose reads a little of a redirect's body so the connection can
// be reused, then closes it.
func drainAndClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	_ = body.Close()
}
