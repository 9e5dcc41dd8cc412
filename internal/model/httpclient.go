package model

import (
	"errors"
	"net/http"
	"time"
)

// ResponseHeaderTimeout bounds the wait for the response headers of a call
// made with HTTPClient. A streamed answer sends its headers as soon as the
// request is accepted; the body is bounded only by the caller's ctx, since
// a long answer legitimately streams for minutes.
const ResponseHeaderTimeout = 10 * time.Minute

// ErrRedirect is the error of a call whose endpoint answered with a
// redirect: a model call is never sent anywhere but to its base URL.
var ErrRedirect = errors.New("the model endpoint answered with a redirect, which is not followed: a model key goes only to the host it is bound to")

// HTTPClient is the client a provider calls its API with when its
// configuration names none. It never follows a redirect: the key travels
// in the request's headers, and net/http carries every header but
// Authorization (x-api-key, api-key…) to a redirect's target, so a bound
// host that answers 307 would hand the key to whatever host it names.
func HTTPClient() *http.Client {
	rt := http.DefaultTransport
	if t, ok := rt.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = ResponseHeaderTimeout
		rt = t
	}
	return &http.Client{
		Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return ErrRedirect
		},
	}
}
