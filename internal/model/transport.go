package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessageLen bounds the message of a classified error: it goes into the
// journal and in front of people, one short line.
const MaxMessageLen = 300

// TransportError classifies an error that carries no answer from the
// provider's API, the same for every provider: a malformed body, a
// timeout, a connection cut in the middle of a response, or any other
// transport failure (refused, reset, TLS, DNS), which may not happen on the
// next try. message builds the text ("<provider>: <what>: <detail>", with
// the key scrubbed).
func TransportError(err error, message func(what, detail string) string) *Error {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var ne net.Error
	switch {
	case errors.Is(err, ErrRedirect):
		// The endpoint is configured to send calls elsewhere: trying again
		// gets the same answer.
		return &Error{Kind: KindBadRequest, Message: message("redirect", ErrRedirect.Error())}
	case errors.As(err, &syntax), errors.As(err, &typeErr):
		return &Error{Kind: KindServer, Message: message("malformed response", "invalid JSON in the stream")}
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return &Error{Kind: KindTimeout, Message: message("timeout", RootCause(err))}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &Error{Kind: KindServer, Message: message("connection", "closed in the middle of the response")}
	}
	return &Error{Kind: KindServer, Message: message("connection", RootCause(err))}
}

// RootCause is the innermost error's text: *url.Error and *net.OpError
// prefix theirs with the method and the URL, which say nothing the caller
// does not know.
func RootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// OneLine makes s one line (control characters and runs of space become
// one space) of at most MaxMessageLen bytes, cut on a rune boundary.
// Secrets must be removed before: a cut could leave part of one.
func OneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > MaxMessageLen {
		cut := MaxMessageLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
