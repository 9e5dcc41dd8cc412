package server

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// streamTree is GET /v1/sessions/{id}/events/stream?include=subagents: the
// journals of the session and of every session below it, merged into one
// stream of server-sent events (Backend.StreamTreeEvents: per session in
// seq order, each exactly once; sub-agents found at connect and as they
// are spawned; at most MaxTreeSessions sessions). Each frame's id is the
// stream's cursor after that event (lt.TreeCursor: the last seq sent per
// session), which the client sends back as Last-Event-ID or ?after= to
// resume; a plain seq there is the root's, its sub-agents from their
// start. A tree larger at connect is a 400; one that grows past the bound
// mid-stream ends the stream, and the reconnect gets the 400.
func (s *Server) streamTree(w http.ResponseWriter, r *http.Request) error {
	root := r.PathValue("id")
	cursor, field, err := treeStreamStart(r, root)
	if err != nil {
		return err
	}
	stream := func(ctx context.Context) iter.Seq2[lt.TreeEvent, error] {
		return s.b.StreamTreeEvents(ctx, root, cursor)
	}
	err = serveStream(s, w, r, stream, func(ev *lt.TreeEvent) ([]byte, error) { return eventFrame(&ev.Event, ev.Cursor) })
	// The backend names its parameter "cursor"; here it came in field.
	var ae *apierror.Error
	if errors.As(err, &ae) && ae.Field == "cursor" {
		named := *ae
		named.Field = field
		return &named
	}
	return err
}

// treeStreamStart returns where a tree stream resumes, as
// Backend.StreamTreeEvents takes it (the value as given: the App reads it,
// app.ParseTreeStart), and the field it was read from: the Last-Event-ID
// header, else ?after=, else the start. It checks the value here too, so
// that a malformed one is a 400 naming the field it came in.
func treeStreamStart(r *http.Request, root string) (cursor, field string, err error) {
	field = "Last-Event-ID"
	v := strings.TrimSpace(r.Header.Get(field))
	if v == "" {
		field = "after"
		if v, err = queryString(r, field); err != nil {
			return "", field, err
		}
	}
	if _, err := app.ParseTreeStart(root, v, field); err != nil {
		return "", field, err
	}
	return v, field, nil
}
