package server

import (
	"io"
	"net/http"
	"time"
)

// An event stream is exempt from http.Server's WriteTimeout (startStream
// clears the deadline), since it lasts as long as its client; its writes get
// a deadline each instead. http.Server's ReadTimeout needs nothing of the
// kind: net/http clears the read deadline once a request's body has been
// read (its background read of the connection starts without one), so a
// handler or a stream that outlives ReadTimeout is not cut off
// (TestReadTimeoutDoesNotCutOffAHandler keeps that true).

// streamWriter is an event stream's writer: each write first moves the
// connection's write deadline to Config.StreamWriteTimeout from now, so a
// stream lives as long as its client reads, and no longer. The flush that
// follows a write runs under the same deadline.
type streamWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *Server) streamWriter(w io.Writer, rc *http.ResponseController) io.Writer {
	return &streamWriter{w: w, rc: rc, timeout: s.cfg.StreamWriteTimeout}
}

func (sw *streamWriter) Write(p []byte) (int, error) {
	// http.ErrNotSupported (an in-process writer): no deadline to move.
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	return sw.w.Write(p)
}
