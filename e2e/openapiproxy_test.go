package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi/datamodel"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/openapi"
)

// openAPIProxy stands between a client and a real server: every answer
// that passes through it is checked against the OpenAPI document
// (internal/openapi) with a maintained validator, so a test driving routes
// through it keeps the document true. It can also break event streams on
// purpose, to make clients resume.
type openAPIProxy struct {
	t     *testing.T
	url   string
	v     validator.Validator
	model *v3.Document

	// cutStreamsAfter, when above zero, ends every event stream after that
	// many frames: cleanly on odd cuts, by aborting the connection in the
	// middle of the next frame on even ones.
	cutStreamsAfter int

	mu        sync.Mutex
	failures  []string
	validated map[string]int // "GET /v1/sessions/{id}" (the document's operation) → answers checked
	cuts      int
	resumed   int // stream requests that carried Last-Event-ID
}

// newOpenAPIProxy starts a validating proxy in front of target.
func newOpenAPIProxy(t *testing.T, target string) *openAPIProxy {
	t.Helper()
	doc, err := libopenapi.NewDocumentWithConfiguration(openapi.JSON(), &datamodel.DocumentConfiguration{
		// A span's children are spans, a session's sub-agents sessions:
		// arrays end the recursion.
		IgnoreArrayCircularReferences: true,
	})
	require.NoError(t, err)
	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs)
	model, err := doc.BuildV3Model()
	require.NoError(t, err)
	p := &openAPIProxy{t: t, v: v, model: &model.Model, validated: map[string]int{}}

	to, err := url.Parse(target)
	require.NoError(t, err)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(to)
			// Keep the body, to check an accepted request against the
			// document once the answer is known.
			if r.In.Body != nil && r.In.Body != http.NoBody {
				b, err := io.ReadAll(r.In.Body)
				if err == nil {
					r.Out.Body = io.NopCloser(bytes.NewReader(b))
					r.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
				}
			}
		},
		ModifyResponse: p.check,
		ErrorLog:       nil,
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// check validates one answer (an event stream's status and headers only:
// it never ends), or arms the cut of an event stream.
func (p *openAPIProxy) check(resp *http.Response) error {
	req := resp.Request
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		p.mu.Lock()
		if req.Header.Get("Last-Event-ID") != "" {
			p.resumed++
		}
		p.mu.Unlock()
		p.record(req, resp, nil)
		if p.cutStreamsAfter > 0 {
			resp.Body = &streamCutter{rc: resp.Body, after: p.cutStreamsAfter, p: p}
		}
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	p.record(req, resp, body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// record validates resp (with body, when given) against the document.
func (p *openAPIProxy) record(req *http.Request, resp *http.Response, body []byte) {
	// The validator reads the request's URL path and method only.
	vreq := req.Clone(req.Context())
	vreq.Body = http.NoBody
	vresp := *resp
	if body != nil {
		vresp.Body = io.NopCloser(bytes.NewReader(body))
	} else {
		vresp.Body = http.NoBody
		vresp.Header = resp.Header.Clone()
		// A stream's body is checked by the clients, frame by frame; here
		// its status and media type.
		vresp.Header.Set("Content-Type", "text/event-stream")
	}
	ok, errs := p.v.ValidateHttpResponse(vreq, &vresp)
	if resp.StatusCode < 300 {
		// A request the server accepted is one the document admits.
		if qreq, err := requestForCheck(req); err == nil {
			rok, rerrs := p.v.ValidateHttpRequestSync(qreq)
			ok = ok && rok
			errs = append(errs, rerrs...)
		}
	}
	route := req.Method + " " + req.URL.Path
	if _, _, template := paths.FindPath(vreq, p.model, nil); template != "" {
		route = req.Method + " " + template
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.validated[route]++
	if ok {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s → %d does not match the OpenAPI document:", req.Method, req.URL.RequestURI(), resp.StatusCode)
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    at %s: %s", se.FieldPath, se.Reason)
		}
	}
	if len(body) > 0 {
		fmt.Fprintf(&b, "\n  body: %.600s", body)
	}
	p.failures = append(p.failures, b.String())
}

// requestForCheck copies req, with its body, for the request validator.
func requestForCheck(req *http.Request) (*http.Request, error) {
	q := req.Clone(req.Context())
	q.Body = http.NoBody
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		q.Body = b
	}
	return q, nil
}

// requireValid fails the test with every answer that did not match.
func (p *openAPIProxy) requireValid() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Empty(p.t, p.failures, "answers that do not match internal/openapi/openapi.yaml:\n%s", strings.Join(p.failures, "\n"))
}

func (p *openAPIProxy) counts() (validated map[string]int, cuts, resumed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	validated = make(map[string]int, len(p.validated))
	for k, v := range p.validated {
		validated[k] = v
	}
	return validated, p.cuts, p.resumed
}

// errStreamCut aborts a proxied stream (ReverseProxy then drops the
// connection mid-response, as a crashed server or a network would).
var errStreamCut = errors.New("stream cut by the test proxy")

// streamCutter passes an event stream through until `after` frames went
// by, then ends it: with EOF (a clean end) or, every other time, with an
// error after a piece of the next frame (a broken connection).
type streamCutter struct {
	rc      io.ReadCloser
	after   int
	p       *openAPIProxy
	frames  int
	prev    byte
	done    error
	pending []byte
}

func (c *streamCutter) Read(b []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	if c.done != nil {
		return 0, c.done
	}
	n, err := c.rc.Read(b)
	for i := 0; i < n; i++ {
		if b[i] == '\n' && c.prev == '\n' {
			c.frames++
			if c.frames == c.after {
				c.p.mu.Lock()
				c.p.cuts++
				abrupt := c.p.cuts%2 == 0
				c.p.mu.Unlock()
				if abrupt {
					// Half of what follows, then a broken connection.
					rest := b[i+1 : n]
					c.pending = append([]byte(nil), rest[:len(rest)/2]...)
					c.done = errStreamCut
				} else {
					c.done = io.EOF
				}
				return i + 1, nil
			}
		}
		c.prev = b[i]
	}
	return n, err
}

func (c *streamCutter) Close() error { return c.rc.Close() }

// TestOpenAPIProxyCatchesAWrongAnswer: the proxy's check fails answers
// that break the document (so a test passing through it means something):
// a session without its required fields, a field of the wrong type, an
// error without its code, an undocumented status.
func TestOpenAPIProxyCatchesAWrongAnswer(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"/v1/sessions/ses_1":   `{"id": "ses_1", "status": "idle"}`,
		"/v1/sessions/ses_2":   `{"id": 2}`,
		"/v1/keys":             `{"data": [{"id": "key_1"}], "next_cursor": null}`,
		"/v1/sessions/ses_404": `{"error": {"message": "no code"}}`,
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/sessions/ses_404":
			w.WriteHeader(http.StatusNotFound)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/keys":
			// A right answer to a request the document does not admit.
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id": "key_1", "name": "a", "role": "reader", "project": "default", "prefix": "lh_a", "created_at": "2026-01-01T00:00:00Z"}`)
			return
		}
		_, _ = io.WriteString(w, bad[r.URL.Path])
	}))
	t.Cleanup(upstream.Close)
	p := newOpenAPIProxy(t, upstream.URL)
	for path := range bad {
		resp, err := http.Get(p.url + path)
		require.NoError(t, err)
		resp.Body.Close()
	}
	p.mu.Lock()
	require.Len(t, p.failures, len(bad), "every wrong answer is caught: %v", p.failures)
	p.mu.Unlock()

	// A request the server accepted but the document refuses (a name that
	// is a number) is caught too, though the answer is right.
	p2 := newOpenAPIProxy(t, upstream.URL)
	resp, err := http.Post(p2.url+"/v1/keys", "application/json", strings.NewReader(`{"name": 5, "role": "reader"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	p2.mu.Lock()
	defer p2.mu.Unlock()
	require.Len(t, p2.failures, 1, "the accepted request that breaks the document is caught: %v", p2.failures)
}
