package export

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/webhook"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Options tune Export. A nil *Options means the defaults.
type Options struct {
	// WithSubagents exports the session's sub-agents too (its children,
	// theirs, and so on). Default: false, the session alone.
	WithSubagents bool
	// Now is the clock of the header's exported_at. Default: time.Now.
	Now func() time.Time
}

// Summary says what an export or an import moved.
type Summary struct {
	// Sessions are the sessions' ids, in file order.
	Sessions []string
	Counts
	// BlobBytes is the blobs' total size.
	BlobBytes int64
	// NewBlobs is how many of the blobs an import wrote (the target had
	// the others).
	NewBlobs int
	// Warnings are things a person should know (a parent not exported, a
	// webhook state another node had already set up).
	Warnings []string
}

// exportPage is how many events one read asks for.
const exportPage = 1000

// readAttempts bounds how often Export re-reads a session that changed
// while it was read.
const readAttempts = 3

// sessionData is one session as read from a store or a file.
type sessionData struct {
	row     store.SessionRow
	webhook *WebhookState
	events  []store.Event
	docs    []docData
}

type docData struct {
	kind store.DocKind
	row  store.DocRow
}

// Export writes the session id of src (with its sub-agents when
// opts.WithSubagents) to w in the export format, and reports what it
// wrote. It reads everything before it writes the first line, except the
// blobs, which it streams one at a time; a failure may leave w with a
// partial file (which Import refuses: it has no end record).
//
// For a session with a webhook_url it reads the session's webhook state
// with WebhookSessionInit, which creates it (with a new secret) if the
// source's dispatcher never did.
func Export(ctx context.Context, src store.Store, id string, w io.Writer, opts *Options) (*Summary, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ids, err := sessionTree(ctx, src, id, o.WithSubagents)
	if err != nil {
		return nil, err
	}
	sessions := make([]*sessionData, 0, len(ids))
	rf := newRefs()
	for _, sid := range ids {
		sd, err := readSession(ctx, src, sid)
		if err != nil {
			return nil, err
		}
		for i := range sd.events {
			if err := rf.event(ctx, &sd.events[i], src.BlobGet); err != nil {
				return nil, fmt.Errorf("export: %w", err)
			}
		}
		for i := range sd.docs {
			if err := rf.doc(sd.docs[i].kind, &sd.docs[i].row); err != nil {
				return nil, fmt.Errorf("export: %w", err)
			}
		}
		sessions = append(sessions, sd)
	}
	if err := rf.expand(ctx, src); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}

	sum := &Summary{Sessions: ids}
	bw := bufio.NewWriterSize(w, 1<<20)
	put := func(v any, raws ...rawField) error {
		line, err := encodeLine(v, raws...)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("export: write: %w", err)
		}
		return nil
	}
	if err := put(headerLine{Kind: kindHeader, Format: Format, Version: Version, ExportedAt: o.Now().UTC(), SessionID: id, Sessions: ids}); err != nil {
		return nil, err
	}
	for _, sd := range sessions {
		r := &sd.row
		err := put(sessionLine{
			Kind: kindSession, ID: r.ID, Project: r.Project, AgentName: r.AgentName, AgentVersion: r.AgentVersion, ParentID: r.ParentID,
			Status: r.Status, LastSeq: r.LastSeq, Runnable: r.Runnable, WakeAt: r.WakeAt,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Webhook: sd.webhook,
		}, rawField{"spec", r.Spec}, rawField{"state", r.State})
		if err != nil {
			return nil, err
		}
		if sd.row.ParentID != "" && !slices.Contains(ids, sd.row.ParentID) {
			sum.Warnings = append(sum.Warnings, fmt.Sprintf("session %s is a sub-agent of %s, which is not in the export", r.ID, r.ParentID))
		}
		sum.Counts.Sessions++
		for i := range sd.events {
			ev := &sd.events[i]
			err := put(eventLine{
				Kind: kindEvent, SessionID: ev.SessionID, Seq: ev.Seq, Type: ev.Type, Time: ev.Time,
				TurnID: ev.TurnID, Step: ev.Step, WorkerID: ev.WorkerID,
			}, rawField{"data", ev.Data})
			if err != nil {
				return nil, err
			}
			sum.Counts.Events++
		}
		for i := range sd.docs {
			d := &sd.docs[i]
			err := put(docLine{
				Kind: kindDoc, DocKind: string(d.kind), SessionID: d.row.SessionID, ID: d.row.ID,
				Status: d.row.Status, CreatedAt: d.row.CreatedAt,
			}, rawField{"doc", d.row.Doc})
			if err != nil {
				return nil, err
			}
			sum.Counts.Docs++
		}
	}
	for _, d := range rf.sorted() {
		data, err := src.BlobGet(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("export: blob %s, referenced by %s: %w", d, rf.blobs[d], err)
		}
		// A damaged source is found here, not at import.
		if got := sha256Hex(data); got != d {
			return nil, fmt.Errorf("export: blob %s, referenced by %s: the source store returned bytes whose sha256 is %s", d, rf.blobs[d], got)
		}
		if err := put(blobLine{Kind: kindBlob, SHA256: d, Size: int64(len(data)), Content: data}); err != nil {
			return nil, err
		}
		sum.Counts.Blobs++
		sum.BlobBytes += int64(len(data))
	}
	if err := put(endLine{Kind: kindEnd, Counts: sum.Counts}); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("export: write: %w", err)
	}
	return sum, nil
}

// sessionTree returns id, and with subagents its descendants as the
// store walks a tree (breadth first, parents before their children, the
// children of one parent oldest first), however many there are.
func sessionTree(ctx context.Context, src store.Store, id string, subagents bool) ([]string, error) {
	if id == "" {
		return nil, errors.New("export: the session id is empty")
	}
	if _, err := src.SessionGet(ctx, id); err != nil {
		return nil, fmt.Errorf("export: session %s: %w", id, err)
	}
	ids := []string{id}
	if !subagents {
		return ids, nil
	}
	members, err := store.WalkTree(ctx, src, id, 0)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// readSession reads a session's row, journal and docs consistently: the
// row is read again at the end and the whole read is repeated when the
// session changed meanwhile.
func readSession(ctx context.Context, src store.Store, id string) (*sessionData, error) {
	for attempt := 1; ; attempt++ {
		sd, same, err := readSessionOnce(ctx, src, id)
		if err != nil {
			return nil, fmt.Errorf("export: session %s: %w", id, err)
		}
		if same {
			return sd, nil
		}
		if attempt == readAttempts {
			return nil, fmt.Errorf("export: session %s changed while it was read, %d times: stop the node that runs it (export is meant for sessions at rest) and try again", id, readAttempts)
		}
	}
}

func readSessionOnce(ctx context.Context, src store.Store, id string) (*sessionData, bool, error) {
	row, err := src.SessionGet(ctx, id)
	if err != nil {
		return nil, false, err
	}
	sd := &sessionData{row: *row}
	for after := int64(0); after < row.LastSeq; {
		page, err := src.EventList(ctx, id, after, int(min(exportPage, row.LastSeq-after)))
		if err != nil {
			return nil, false, fmt.Errorf("read events: %w", err)
		}
		if len(page) == 0 {
			return nil, false, fmt.Errorf("read events: the journal ends at seq %d, before the session's last seq %d", after, row.LastSeq)
		}
		for _, ev := range page {
			if ev.Seq != after+1 {
				return nil, false, fmt.Errorf("read events: seq %d follows seq %d: the source journal has a gap", ev.Seq, after)
			}
			after = ev.Seq
			if ev.Seq <= row.LastSeq {
				sd.events = append(sd.events, ev)
			}
		}
	}
	lists := map[store.DocKind]func(context.Context, string) ([]*store.DocRow, error){
		store.DocTurn:       src.TurnList,
		store.DocAction:     func(ctx context.Context, id string) ([]*store.DocRow, error) { return src.ActionList(ctx, id, "") },
		store.DocEffect:     src.EffectList,
		store.DocArtifact:   src.ArtifactList,
		store.DocCheckpoint: src.CheckpointList,
	}
	for _, kind := range docKinds {
		rows, err := lists[kind](ctx, id)
		if err != nil {
			return nil, false, fmt.Errorf("read %ss: %w", kind, err)
		}
		for _, r := range rows {
			sd.docs = append(sd.docs, docData{kind: kind, row: *r})
		}
	}
	if url, err := webhookURL(ctx, sd.events, src.BlobGet); err != nil {
		return nil, false, err
	} else if url != "" {
		ws, err := src.WebhookSessionInit(ctx, id, webhook.NewSecret())
		if err != nil {
			return nil, false, fmt.Errorf("read webhook state: %w", err)
		}
		sd.webhook = &WebhookState{Secret: ws.Secret, Cursor: ws.Cursor, DisabledAt: ws.DisabledAt}
	}
	again, err := src.SessionGet(ctx, id)
	if err != nil {
		return nil, false, err
	}
	same := again.LastSeq == row.LastSeq && again.Status == row.Status && again.UpdatedAt.Equal(row.UpdatedAt) &&
		bytes.Equal(again.State, row.State) && again.Runnable == row.Runnable
	return sd, same, nil
}

// webhookURL returns the webhook_url of a journal's session.created,
// reading its payload back from its blob if it was moved to one (a large
// input).
func webhookURL(ctx context.Context, events []store.Event, get func(context.Context, string) ([]byte, error)) (string, error) {
	if len(events) == 0 || events[0].Type != lt.EventSessionCreated {
		return "", nil
	}
	data := events[0].Data
	if d := blobStub(data); d != "" {
		full, err := get(ctx, d)
		if err != nil {
			return "", fmt.Errorf("read session.created: blob %s: %w", d, err)
		}
		data = full
	}
	var created lt.SessionCreatedData
	if err := json.Unmarshal(data, &created); err != nil {
		return "", fmt.Errorf("read session.created: %w", err)
	}
	return created.WebhookURL, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
