package export

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/webhook"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ImportOptions tune Import. A nil *ImportOptions means the defaults.
type ImportOptions struct {
	// DryRun checks the file and the target store and writes nothing.
	// Default: false.
	DryRun bool
}

// Import reads the export file in r (size bytes) into dst. It checks the
// whole file, and that none of its sessions exists in dst, before it
// writes anything; see the package comment. A file that is damaged,
// truncated or inconsistent gets an error matching ErrInvalid; a session
// (or an artifact or action id) that dst already holds, one matching
// store.ErrConflict. The file is read twice (checked, then its blobs
// copied), so r must not change meanwhile; a blob that did is refused.
func Import(ctx context.Context, dst store.Store, r io.ReaderAt, size int64, opts *ImportOptions) (*Summary, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	f, err := parse(r, size)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if err := f.checkRefs(ctx); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	sum := &Summary{Sessions: f.header.Sessions, Counts: f.counts, BlobBytes: f.blobBytes}
	if err := f.checkTarget(ctx, dst, sum); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if o.DryRun {
		return sum, nil
	}

	// Blobs first: a session's events may name them from its first
	// commit on. Content addressing makes one the target has the same.
	for _, d := range f.blobOrder {
		has, err := dst.BlobHas(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("import: blob %s: %w", d, err)
		}
		if has {
			continue
		}
		data, err := f.readBlob(d)
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		if err := dst.BlobPut(ctx, d, data); err != nil {
			return nil, fmt.Errorf("import: blob %s: %w", d, err)
		}
		sum.NewBlobs++
	}
	// The file brought the bytes of every blob: the projects of its
	// sessions own them (snapshot blobs: a runner of the project may
	// fetch them, and its snapshots may name them without sending them).
	if err := f.ownBlobs(ctx, dst); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	for i, sd := range f.sessions {
		if err := createSession(ctx, dst, sd, f.blobOrder); err != nil {
			if i > 0 {
				err = fmt.Errorf("%w (the sessions before it in the file were imported: %v)", err, f.header.Sessions[:i])
			}
			return nil, fmt.Errorf("import: %w", err)
		}
		sum.Warnings = append(sum.Warnings, setWebhookState(ctx, dst, sd)...)
	}
	return sum, nil
}

// ownBlobs records that the projects of the file's sessions own its
// blobs, each for itself, and the snapshots the sessions refer to as
// trees (snapshot.Claim walks them: a tree stands for what it reaches
// only once read as one, whatever else the file holds).
func (f *file) ownBlobs(ctx context.Context, dst store.Store) error {
	if len(f.blobOrder) == 0 {
		return nil
	}
	done := map[string]bool{}
	for _, sd := range f.sessions {
		p := cmp.Or(sd.row.Project, lt.DefaultProject)
		if done[p] {
			continue
		}
		done[p] = true
		if err := dst.BlobOwn(ctx, p, f.blobOrder); err != nil {
			return fmt.Errorf("blobs of project %q: %w", p, err)
		}
		inFile := func(d string) bool { _, ok := f.blobs[d]; return ok }
		for _, id := range f.snapshots {
			if _, err := snapshot.Claim(ctx, dst, dst, p, id, snapshot.ClaimOptions{May: inFile}); err != nil {
				return fmt.Errorf("snapshots of project %q: %w", p, err)
			}
		}
	}
	return nil
}

// createSession writes one session, its journal and its docs in one
// transaction.
func createSession(ctx context.Context, dst store.Store, sd *sessionData, blobs []string) error {
	events := make([]store.NewEvent, len(sd.events))
	for i, ev := range sd.events {
		events[i] = store.NewEvent{Type: ev.Type, Time: ev.Time, TurnID: ev.TurnID, Step: ev.Step, WorkerID: ev.WorkerID, Data: ev.Data}
	}
	docs := make([]store.DocWrite, len(sd.docs))
	for i, d := range sd.docs {
		docs[i] = store.DocWrite{Kind: d.kind, ID: d.row.ID, SessionID: d.row.SessionID, Status: d.row.Status, Doc: d.row.Doc, CreatedAt: d.row.CreatedAt}
	}
	// The file's blobs are its sessions' (their payloads, artifacts and
	// snapshots): each session refers to them, so keys of its project may
	// read them (store.BlobInProject).
	stored, err := dst.SessionCreate(ctx, &store.SessionCreateParams{Session: sd.row, Events: events, Docs: docs, BlobRefs: blobs})
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("session %s was created in the target store while the file was checked: %w", sd.row.ID, err)
		}
		return fmt.Errorf("session %s: %w", sd.row.ID, err)
	}
	if n := int64(len(stored)); n != sd.row.LastSeq {
		return fmt.Errorf("session %s: the target store wrote %d events, the file holds %d", sd.row.ID, n, sd.row.LastSeq)
	}
	return nil
}

// setWebhookState gives an imported session its source's webhook secret
// (the application knows that one) and moves its notification cursor to
// where the source was, so the target's dispatcher neither re-signs with a
// new secret nor sends the session's history again. It returns warnings:
// by now the session is imported, and a node of the target store may have
// seen it first.
func setWebhookState(ctx context.Context, dst store.Store, sd *sessionData) []string {
	id := sd.row.ID
	secret, cursor := webhook.NewSecret(), sd.row.LastSeq
	if w := sd.webhook; w != nil {
		secret, cursor = w.Secret, min(w.Cursor, sd.row.LastSeq)
	}
	ws, err := dst.WebhookSessionInit(ctx, id, secret)
	if err != nil {
		return []string{fmt.Sprintf("session %s: its webhook state was not set (%v): its past notifications may be sent again", id, err)}
	}
	var warn []string
	if sd.webhook != nil && ws.Secret != secret {
		warn = append(warn, fmt.Sprintf("session %s: a node of the target store gave its webhook_url a new signing secret before the import could set the source's", id))
	}
	switch {
	case ws.Cursor != 0:
		warn = append(warn, fmt.Sprintf("session %s: a node of the target store had already turned its events into webhook notifications", id))
	case cursor > 0:
		if err := dst.WebhookEnqueue(ctx, id, 0, cursor, nil); err != nil {
			warn = append(warn, fmt.Sprintf("session %s: its webhook cursor was not set (%v): its past notifications may be sent again", id, err))
		}
	}
	if sd.webhook != nil && sd.webhook.DisabledAt != nil {
		warn = append(warn, fmt.Sprintf("session %s: its webhook_url was disabled in the source store (it answered 410); the target store will call it again", id))
	}
	return warn
}

// file is a parsed, checked export file.
type file struct {
	r         io.ReaderAt
	header    headerLine
	sessions  []*sessionData
	blobs     map[string]blobLoc
	blobOrder []string
	// snapshots are the ids of the snapshots the sessions refer to
	// (checkRefs): their projects own them as trees once imported.
	snapshots []string
	counts    Counts
	blobBytes int64
}

// blobLoc is where a blob's line is in the file.
type blobLoc struct {
	off, length int64
}

// invalid returns an error about the file's content.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// parse reads and checks every line of the file.
func parse(r io.ReaderAt, size int64) (*file, error) {
	f := &file{r: r, blobs: map[string]blobLoc{}}
	lr := newLineReader(io.NewSectionReader(r, 0, size))
	var (
		cur    *sessionData
		ended  bool
		docIDs = map[string]bool{}
	)
	for {
		line, off, length, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		at := fmt.Sprintf("line %d", lr.n)
		if ended {
			if len(line) == 0 {
				continue
			}
			return nil, invalid("%s: content after the end record", at)
		}
		var l anyLine
		if err := json.Unmarshal(line, &l); err != nil {
			if lr.n == 1 {
				return nil, invalid("line 1 is not JSON (%v): not a Longhaul session export", err)
			}
			return nil, invalid("%s: %v (the file is damaged or truncated)", at, err)
		}
		if lr.n == 1 {
			if err := f.setHeader(&l); err != nil {
				return nil, err
			}
			continue
		}
		switch l.Kind {
		case kindSession:
			if cur, err = f.addSession(at, &l); err != nil {
				return nil, err
			}
		case kindEvent:
			if err := addEvent(at, cur, &l); err != nil {
				return nil, err
			}
			f.counts.Events++
		case kindDoc:
			if err := addDoc(at, cur, &l, docIDs); err != nil {
				return nil, err
			}
			f.counts.Docs++
		case kindBlob:
			if err := f.addBlob(at, &l, off, length); err != nil {
				return nil, err
			}
		case kindEnd:
			if err := f.end(at, &l); err != nil {
				return nil, err
			}
			ended = true
		case kindHeader:
			return nil, invalid("%s: a second header", at)
		default:
			return nil, invalid("%s: unknown kind %q", at, l.Kind)
		}
	}
	if lr.n == 0 {
		return nil, invalid("the file is empty")
	}
	if !ended {
		return nil, invalid("the file is truncated: it ends at line %d without its end record", lr.n)
	}
	return f, nil
}

func (f *file) setHeader(l *anyLine) error {
	if l.Kind != kindHeader || l.Format != Format {
		return invalid("line 1 is not a %s header: not a Longhaul session export", Format)
	}
	switch {
	case l.Version > Version:
		return invalid("format version %d is newer than this longhaul's (%d): import it with a newer longhaul", l.Version, Version)
	case l.Version < 1:
		return invalid("header: version %d is not a format version", l.Version)
	case len(l.Sessions) == 0 || l.SessionID == "" || l.Sessions[0] != l.SessionID:
		return invalid("header: sessions must list the exported session_id first")
	}
	if err := checkSessionID("header", "session_id", l.SessionID); err != nil {
		return err
	}
	for i, id := range l.Sessions {
		if id == "" || slices.Contains(l.Sessions[:i], id) {
			return invalid("header: sessions[%d] %s is empty or listed twice", i, quoteID(id))
		}
		if err := checkSessionID("header", "sessions["+strconv.Itoa(i)+"]", id); err != nil {
			return err
		}
	}
	f.header = headerLine{Kind: kindHeader, Format: l.Format, Version: l.Version, ExportedAt: l.ExportedAt, SessionID: l.SessionID, Sessions: l.Sessions}
	return nil
}

func (f *file) addSession(at string, l *anyLine) (*sessionData, error) {
	n := len(f.sessions)
	if n >= len(f.header.Sessions) || l.ID != f.header.Sessions[n] {
		return nil, invalid("%s: session %q is not the next one the header lists", at, l.ID)
	}
	if n > 0 {
		if err := f.sessions[n-1].complete(); err != nil {
			return nil, err
		}
	}
	if l.ParentID != "" {
		if err := checkSessionID(at, "parent_id", l.ParentID); err != nil {
			return nil, err
		}
	}
	switch {
	case l.Status == "":
		return nil, invalid("%s: session %s: status is empty", at, l.ID)
	case l.CreatedAt.IsZero():
		return nil, invalid("%s: session %s: created_at is missing", at, l.ID)
	case l.LastSeq < 0:
		return nil, invalid("%s: session %s: last_seq %d is negative", at, l.ID, l.LastSeq)
	case l.Webhook != nil && l.Webhook.Secret == "":
		return nil, invalid("%s: session %s: webhook.secret is empty", at, l.ID)
	}
	spec, err := pick("spec", l.Spec, l.SpecBase64)
	if err != nil {
		return nil, invalid("%s: session %s: %v", at, l.ID, err)
	}
	state, err := pick("state", l.State, l.StateBase64)
	if err != nil {
		return nil, invalid("%s: session %s: %v", at, l.ID, err)
	}
	sd := &sessionData{
		row: store.SessionRow{
			ID: l.ID, Project: l.Project, AgentName: l.AgentName, AgentVersion: l.AgentVersion, ParentID: l.ParentID, Status: l.Status,
			Spec: spec, State: state, LastSeq: l.LastSeq, Runnable: l.Runnable, WakeAt: l.WakeAt,
			CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt,
		},
		webhook: l.Webhook,
	}
	f.sessions = append(f.sessions, sd)
	f.counts.Sessions++
	return sd, nil
}

// complete checks that a session's journal is whole.
func (sd *sessionData) complete() error {
	if n := int64(len(sd.events)); n != sd.row.LastSeq {
		return invalid("session %s: the file holds %d of its events, its last seq is %d (events are missing)", sd.row.ID, n, sd.row.LastSeq)
	}
	return nil
}

func addEvent(at string, cur *sessionData, l *anyLine) error {
	if cur == nil || l.SessionID != cur.row.ID {
		return invalid("%s: an event of session %q outside that session's lines", at, l.SessionID)
	}
	want := int64(len(cur.events)) + 1
	switch {
	case l.Seq != want:
		return invalid("%s: session %s: event seq %d where seq %d was due (the journal has a gap or is out of order)", at, l.SessionID, l.Seq, want)
	case l.Seq > cur.row.LastSeq:
		return invalid("%s: session %s: event seq %d is past the session's last seq %d", at, l.SessionID, l.Seq, cur.row.LastSeq)
	case l.Type == "":
		return invalid("%s: session %s event %d: type is empty", at, l.SessionID, l.Seq)
	case l.Time.IsZero():
		return invalid("%s: session %s event %d: time is missing", at, l.SessionID, l.Seq)
	}
	data, err := pick("data", l.Data, l.DataBase64)
	if err != nil {
		return invalid("%s: session %s event %d: %v", at, l.SessionID, l.Seq, err)
	}
	cur.events = append(cur.events, store.Event{
		SessionID: l.SessionID, Seq: l.Seq, Type: l.Type, Time: l.Time, TurnID: l.TurnID, Step: l.Step, WorkerID: l.WorkerID, Data: data,
	})
	return nil
}

func addDoc(at string, cur *sessionData, l *anyLine, seen map[string]bool) error {
	if cur == nil || l.SessionID != cur.row.ID {
		return invalid("%s: a doc of session %q outside that session's lines", at, l.SessionID)
	}
	kind := store.DocKind(l.DocKind)
	key := l.DocKind + "/" + l.ID
	switch {
	case !slices.Contains(docKinds, kind):
		return invalid("%s: unknown doc_kind %q", at, l.DocKind)
	case l.ID == "":
		return invalid("%s: session %s %s: id is empty", at, l.SessionID, kind)
	case !docIDPattern.MatchString(l.ID):
		return checkDocID(at, string(kind)+" id", l.ID)
	case seen[key]:
		return invalid("%s: %s %s appears twice", at, kind, l.ID)
	case l.CreatedAt.IsZero():
		return invalid("%s: %s %s: created_at is missing", at, kind, l.ID)
	}
	doc, err := pick("doc", l.Doc, l.DocBase64)
	if err != nil {
		return invalid("%s: %s %s: %v", at, kind, l.ID, err)
	}
	seen[key] = true
	cur.docs = append(cur.docs, docData{kind: kind, row: store.DocRow{ID: l.ID, SessionID: l.SessionID, Status: l.Status, Doc: doc, CreatedAt: l.CreatedAt}})
	return nil
}

func (f *file) addBlob(at string, l *anyLine, off, length int64) error {
	if err := checkBlob(l.SHA256, l.Size, l.Content); err != nil {
		return invalid("%s: %v", at, err)
	}
	if _, dup := f.blobs[l.SHA256]; dup {
		return invalid("%s: blob %s appears twice", at, l.SHA256)
	}
	f.blobs[l.SHA256] = blobLoc{off: off, length: length}
	f.blobOrder = append(f.blobOrder, l.SHA256)
	f.counts.Blobs++
	f.blobBytes += l.Size
	return nil
}

// checkBlob verifies a blob's bytes against its digest and size.
func checkBlob(sha string, size int64, content []byte) error {
	if !isDigest(sha) {
		return fmt.Errorf("blob sha256 %q is not 64 lowercase hex digits", sha)
	}
	if int64(len(content)) != size {
		return fmt.Errorf("blob %s holds %d bytes, its size says %d (the file is damaged)", sha, len(content), size)
	}
	if got := sha256Hex(content); got != sha {
		return fmt.Errorf("blob %s: its content's sha256 is %s (the file is damaged)", sha, got)
	}
	return nil
}

func (f *file) end(at string, l *anyLine) error {
	if len(f.sessions) != len(f.header.Sessions) {
		return invalid("%s: the end comes after %d of the %d sessions the header lists", at, len(f.sessions), len(f.header.Sessions))
	}
	if err := f.sessions[len(f.sessions)-1].complete(); err != nil {
		return err
	}
	if l.Counts == nil || *l.Counts != f.counts {
		var said Counts
		if l.Counts != nil {
			said = *l.Counts
		}
		return invalid("%s: the end record counts %+v, the file holds %+v", at, said, f.counts)
	}
	return nil
}

// readBlob reads a blob back from the file, checking it again: the file
// may have changed since parse.
func (f *file) readBlob(d string) ([]byte, error) {
	loc, ok := f.blobs[d]
	if !ok {
		return nil, fmt.Errorf("blob %s is not in the file: %w", d, store.ErrNotFound)
	}
	buf := make([]byte, loc.length)
	if n, err := f.r.ReadAt(buf, loc.off); err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return nil, fmt.Errorf("read blob %s: %w", d, err)
	}
	var l blobLine
	if err := json.Unmarshal(buf, &l); err != nil || l.SHA256 != d {
		return nil, invalid("blob %s changed since it was checked: the file was modified during the import", d)
	}
	if err := checkBlob(l.SHA256, l.Size, l.Content); err != nil {
		return nil, invalid("blob %s changed since it was checked (%v): the file was modified during the import", d, err)
	}
	return l.Content, nil
}

// fileBlobs serves the file's blobs to the snapshot walk.
type fileBlobs struct{ f *file }

func (b fileBlobs) BlobGet(_ context.Context, d string) ([]byte, error) { return b.f.readBlob(d) }

func (b fileBlobs) BlobHas(_ context.Context, d string) (bool, error) {
	_, ok := b.f.blobs[d]
	return ok, nil
}

func (b fileBlobs) BlobPut(context.Context, string, []byte) error {
	return errors.New("an export file is read-only")
}

// checkRefs checks that every blob the sessions reference is in the file.
func (f *file) checkRefs(ctx context.Context) error {
	rf := newRefs()
	fb := fileBlobs{f}
	for _, sd := range f.sessions {
		for i := range sd.events {
			if err := rf.event(ctx, &sd.events[i], fb.BlobGet); err != nil {
				return invalid("%v", err)
			}
		}
		for i := range sd.docs {
			if err := rf.doc(sd.docs[i].kind, &sd.docs[i].row); err != nil {
				return invalid("%v", err)
			}
		}
	}
	if err := rf.expand(ctx, fb); err != nil {
		return invalid("%v", err)
	}
	f.snapshots = slices.Sorted(maps.Keys(rf.snapshots))
	for _, d := range rf.sorted() {
		if _, ok := f.blobs[d]; !ok {
			return invalid("blob %s, referenced by %s, is not in the file", d, rf.blobs[d])
		}
	}
	return nil
}

// checkTarget refuses sessions, artifacts and actions that dst holds
// already (their ids are global) and a sub-agent whose parent, in the file
// or in dst, is of another project; it warns of parents that are neither
// in the file nor in dst.
func (f *file) checkTarget(ctx context.Context, dst store.Store, sum *Summary) error {
	projects := make(map[string]string, len(f.sessions))
	for _, sd := range f.sessions {
		projects[sd.row.ID] = cmp.Or(sd.row.Project, lt.DefaultProject)
	}
	for _, sd := range f.sessions {
		id := sd.row.ID
		if _, err := dst.SessionGet(ctx, id); found(err) != nil {
			return fmt.Errorf("session %s: %w", id, found(err))
		}
		for _, d := range sd.docs {
			var err error
			switch d.kind {
			case store.DocArtifact:
				_, err = dst.ArtifactGet(ctx, d.row.ID)
			case store.DocAction:
				_, err = dst.ActionGetByID(ctx, d.row.ID)
			default:
				continue
			}
			if err := found(err); err != nil {
				return fmt.Errorf("session %s %s %s: %w", id, d.kind, d.row.ID, err)
			}
		}
		p := sd.row.ParentID
		if p == "" {
			continue
		}
		parent, ok := projects[p]
		if !ok {
			row, err := dst.SessionGet(ctx, p)
			switch {
			case errors.Is(err, store.ErrNotFound):
				sum.Warnings = append(sum.Warnings, fmt.Sprintf("session %s is a sub-agent of %s, which is neither in the file nor in the target store", id, p))
				continue
			case err != nil:
				return fmt.Errorf("session %s: parent %s: %w", id, p, err)
			}
			parent = cmp.Or(row.Project, lt.DefaultProject)
		}
		// spawn_agent makes a sub-agent in its parent's project, so only
		// a crafted file names a parent of another: the tree would cross
		// projects (the sub-agent would report its answers into the other
		// project's journal).
		if parent != projects[id] {
			return invalid("session %s: its parent %s is in project %q, not in its own (%q): a sub-agent is in its parent's project", id, p, parent, projects[id])
		}
	}
	return nil
}

// found maps a lookup's error: a row that exists is a conflict, one that
// does not is fine (nil), any other error stays.
func found(err error) error {
	switch {
	case err == nil:
		return fmt.Errorf("it already exists in the target store: %w (import never overwrites; delete it there or import into another store)", store.ErrConflict)
	case errors.Is(err, store.ErrNotFound):
		return nil
	}
	return err
}
