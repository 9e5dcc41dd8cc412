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

// streamWriter is an event stream's writer: each send (a batch of frames,
// or a ping) writes and flushes within Config.StreamWriteTimeout from its
// start, so a stream lives as long as its client reads, and no longer.
// One deadline per send, not per frame: moving it is not free, and a
// thousand streams send every event.
type streamWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *Server) streamWriter(w io.Writer, rc *http.ResponseController) *streamWriter {
	return &streamWriter{w: w, rc: rc, timeout: s.cfg.StreamWriteTimeout}
}

// send writes p and flushes it; errClientGone when either fails.
func (sw *streamWriter) send(p []byte) error {
	// http.ErrNotSupported (an in-process writer): no deadline to move.
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	if _, err := sw.w.Write(p); err != nil {
		return errClientGone
	}
	if err := sw.rc.Flush(); err != nil {
		return errClientGone
	}
	return nil
}
