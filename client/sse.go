package client

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"time"
)

// This file parses text/event-stream as the WHATWG HTML standard specifies
// ("Server-sent events", "Interpreting an event stream"), for the fields the
// API uses: id, event, data, retry, and comments.

// sseEvent is one dispatched message.
type sseEvent struct {
	// ID is the last event ID at dispatch: it persists from earlier
	// messages when this one has no id field.
	ID string
	// Event is the event type; "message" when the stream named none.
	Event string
	// Data is the data lines joined with "\n".
	Data string
}

// maxSSELine bounds one line. An event is inlined up to 64 KiB of data (a
// larger payload becomes a blob reference), so this is a guard against a
// runaway stream, not a limit an honest server reaches.
const maxSSELine = 16 << 20

// sseReader reads messages from an event stream.
type sseReader struct {
	sc      *bufio.Scanner
	lastID  string
	retry   time.Duration // the last valid retry field; 0 if none
	started bool
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSSELine)
	sc.Split(sseLines())
	return &sseReader{sc: sc}
}

// Next returns the next message. At the end of the stream it returns io.EOF
// (or the read error): a message without its closing blank line was cut off
// and is discarded, as the standard requires.
func (r *sseReader) Next() (sseEvent, error) {
	var data strings.Builder
	var typ string
	for r.sc.Scan() {
		line := r.sc.Text()
		if !r.started {
			r.started = true
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		if line == "" {
			if data.Len() == 0 {
				typ = ""
				continue
			}
			if typ == "" {
				typ = "message"
			}
			return sseEvent{ID: r.lastID, Event: typ, Data: strings.TrimSuffix(data.String(), "\n")}, nil
		}
		if line[0] == ':' {
			continue // a comment, such as the server's ": ping"
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			typ = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.ContainsRune(value, 0) {
				r.lastID = value
			}
		case "retry":
			if ms, ok := asciiDigits(value); ok {
				r.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}

// asciiDigits parses a non-empty string of ASCII digits; ok is false for
// anything else, or for a value too large to be a sane delay.
func asciiDigits(s string) (int64, bool) {
	if s == "" || len(s) > 12 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// sseLines splits lines ending in CRLF, LF or a lone CR. A CR at the end of
// the buffered data ends its line at once (a server that ends lines with CR
// must not have its event held back until the next byte); the LF that may
// follow it in the next read is then skipped.
func sseLines() bufio.SplitFunc {
	skipLF := false
	return func(data []byte, atEOF bool) (int, []byte, error) {
		// skipped counts into advance: a Scanner given no token reads
		// more before looking at what it holds, so the line after the
		// skipped LF must come out of this same call.
		skipped := 0
		if skipLF && len(data) > 0 {
			skipLF = false
			if data[0] == '\n' {
				skipped = 1
				data = data[1:]
			}
		}
		if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
			if data[i] == '\n' {
				return skipped + i + 1, data[:i], nil
			}
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return skipped + i + 2, data[:i], nil
				}
				return skipped + i + 1, data[:i], nil
			}
			skipLF = true
			return skipped + i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			// A last line without an end: part of a message that the
			// caller discards, since no blank line follows.
			return skipped + len(data), data, nil
		}
		return skipped, nil, nil
	}
}
