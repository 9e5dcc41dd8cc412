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
// start, and at least all but a 64th of it, so a stream lives as long as
// its client reads, and no longer. The deadline is set once per send, not
// per frame, and moved only once a 64th of the timeout has passed since it
// was set (a second of the default minute): moving it takes a lock in the
// runtime's timers, and a thousand streams of a busy session each send
// many times a second.
type streamWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
	// deadline is the write deadline set last (zero: none yet).
	deadline time.Time
}

// deadlineSlack is the part of the timeout a send may find used up before
// the deadline is moved.
const deadlineSlack = 64

func (s *Server) streamWriter(w io.Writer, rc *http.ResponseController) *streamWriter {
	return &streamWriter{w: w, rc: rc, timeout: s.cfg.StreamWriteTimeout}
}

// send writes p and flushes it; errClientGone when either fails.
func (sw *streamWriter) send(p []byte) error {
	now := time.Now()
	if sw.deadline.Sub(now) < sw.timeout-sw.timeout/deadlineSlack {
		sw.deadline = now.Add(sw.timeout)
		// http.ErrNotSupported (an in-process writer): no deadline to move.
		_ = sw.rc.SetWriteDeadline(sw.deadline)
	}
	if _, err := sw.w.Write(p); err != nil {
		return errClientGone
	}
	if err := sw.rc.Flush(); err != nil {
		return errClientGone
	}
	return nil
}
