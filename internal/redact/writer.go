package redact

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// maxLineBuffer is how much of a line without a line break a Writer holds
// before it writes a redacted prefix of it anyway.
const maxLineBuffer = 64 << 10

// Writer redacts what is written through it before passing it on (a log
// stream). It buffers up to the end of each line, so a secret written in two
// pieces is still seen whole; a line longer than 64 KiB is passed on in
// pieces cut outside any secret. Call Flush to pass on a last partial line.
// It is safe for concurrent use.
//
// A value that itself contains a line break can be missed when the break
// falls between two writes; the vault refuses such values.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	current func() *Redactor
	buf     []byte
}

// Writer returns a Writer that redacts with r.
func (r *Redactor) Writer(w io.Writer) *Writer {
	return NewWriter(w, func() *Redactor { return r })
}

// NewWriter returns a Writer that redacts with the Redactor that current
// returns at each write (nil: none), so that a holder can swap in a new one
// when secrets change: NewWriter(os.Stderr, ptr.Load) with an
// atomic.Pointer[Redactor].
func NewWriter(w io.Writer, current func() *Redactor) *Writer {
	return &Writer{w: w, current: current}
}

// Write buffers p and passes on every complete line, redacted. It reports
// len(p) unless the underlying writer failed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	r := w.current()
	if i := bytes.LastIndexByte(w.buf, '\n'); i >= 0 {
		if err := w.emit(r, i+1); err != nil {
			return 0, err
		}
	}
	if len(w.buf) > maxLineBuffer {
		// A very long line: pass on all but the tail that could hold the
		// start of a secret, never cutting through one.
		limit := len(w.buf) - r.keep()
		if limit > 0 {
			if err := w.emit(r, r.safePrefix(w.buf, limit)); err != nil {
				return 0, err
			}
		}
	}
	return len(p), nil
}

// Flush passes on whatever is buffered, redacted.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.emit(w.current(), len(w.buf))
}

// emit writes the first n buffered bytes, redacted, and drops them from the
// buffer.
func (w *Writer) emit(r *Redactor, n int) error {
	if n == 0 {
		return nil
	}
	out := r.Bytes(w.buf[:n])
	if _, err := w.w.Write(out); err != nil {
		// Drop the bytes anyway: retrying the same write would fail again
		// and the buffer would grow without bound.
		w.drop(n)
		return fmt.Errorf("redacted write: %w", err)
	}
	w.drop(n)
	return nil
}

func (w *Writer) drop(n int) {
	rest := copy(w.buf, w.buf[n:])
	w.buf = w.buf[:rest]
	if cap(w.buf) > 4*maxLineBuffer && rest < maxLineBuffer {
		// Give back the memory of an exceptionally long line.
		w.buf = append([]byte(nil), w.buf...)
	}
}
