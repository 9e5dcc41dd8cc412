package server

import (
	"io"
	"net/http"
	"time"
)

// http.Server.ReadTimeout bounds reading a request's header and body, so a
// client that sends one byte of its body and then nothing loses its
// connection. But net/http keeps that read deadline while the handler runs,
// and once it passes, its background read of the connection fails and
// cancels the request's context: a handler that runs longer than
// ReadTimeout, and every event stream, would be cut off. So the deadline is
// lifted once the body has been read to its end, or at once when there is
// none. Between requests http.Server sets its own (IdleTimeout, then
// ReadHeaderTimeout).

// liftReadDeadline returns the body to give r: body itself, after lifting
// the read deadline when r has none, else body wrapped so that reading its
// end lifts it. A writer without deadlines (an in-process caller) is left
// alone.
func liftReadDeadline(w http.ResponseWriter, r *http.Request, body io.ReadCloser) io.ReadCloser {
	rc := http.NewResponseController(w)
	if !hasBody(r) {
		_ = rc.SetReadDeadline(time.Time{}) // http.ErrNotSupported: there is none to lift
		return body
	}
	return &deadlineLifter{ReadCloser: body, rc: rc}
}

// deadlineLifter lifts the connection's read deadline when its body reads
// to the end.
type deadlineLifter struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *deadlineLifter) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
