package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// refs collects the blobs that sessions reference, each with what first
// referenced it (for error messages). The same walk runs on both sides:
// Export over the source store, Import over the file's blobs, so a file
// is self-contained exactly when the walk finds every blob in it.
type refs struct {
	blobs     map[string]string // digest -> referrer
	snapshots map[string]string // snapshot id -> referrer
}

func newRefs() *refs {
	return &refs{blobs: map[string]string{}, snapshots: map[string]string{}}
}

func (r *refs) addBlob(d, by string) {
	if _, ok := r.blobs[d]; !ok {
		r.blobs[d] = by
	}
}

func (r *refs) addSnapshot(d, by string) {
	if d == "" {
		return
	}
	if _, ok := r.snapshots[d]; !ok {
		r.snapshots[d] = by
	}
}

// isDigest reports a lowercase hex SHA-256.
func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// blobStub returns the digest of a payload the engine moved to a blob
// (data {"blob": {"sha256": ..., "size": ...}, "preview": ...}), or "".
// The test is the engine's own (a payload starting with {"blob":).
func blobStub(data []byte) string {
	if !bytes.HasPrefix(data, []byte(`{"blob":`)) {
		return ""
	}
	var stub lt.BlobData
	if json.Unmarshal(data, &stub) != nil || !isDigest(stub.Blob.SHA256) {
		return ""
	}
	return stub.Blob.SHA256
}

// event records what ev references. get reads a blob, for an event whose
// payload was moved to one and must be looked into (a checkpoint, an
// artifact, a workspace restore).
func (r *refs) event(ctx context.Context, ev *store.Event, get func(context.Context, string) ([]byte, error)) error {
	by := fmt.Sprintf("session %s event %d (%s)", ev.SessionID, ev.Seq, ev.Type)
	data := ev.Data
	if d := blobStub(data); d != "" {
		r.addBlob(d, by)
		switch ev.Type {
		case lt.EventCheckpointCreated, lt.EventArtifactCreated, lt.EventEnvironmentRestored:
			full, err := get(ctx, d)
			if err != nil {
				return fmt.Errorf("%s: read its payload's blob %s: %w", by, d, err)
			}
			data = full
		default:
			return nil
		}
	}
	switch ev.Type {
	case lt.EventCheckpointCreated:
		var d lt.CheckpointCreatedData
		if err := json.Unmarshal(data, &d); err != nil {
			return fmt.Errorf("%s: %w", by, err)
		}
		r.addSnapshot(d.Checkpoint.Snapshot, by)
	case lt.EventEnvironmentRestored:
		var d lt.EnvironmentRestoredData
		if err := json.Unmarshal(data, &d); err != nil {
			return fmt.Errorf("%s: %w", by, err)
		}
		r.addSnapshot(d.Snapshot, by)
	case lt.EventArtifactCreated:
		var d lt.ArtifactCreatedData
		if err := json.Unmarshal(data, &d); err != nil {
			return fmt.Errorf("%s: %w", by, err)
		}
		if d.Artifact.SHA256 != "" {
			r.addBlob(d.Artifact.SHA256, by)
		}
	case lt.EventContextCompacted:
		// The context snapshot a resumed worker starts from (without it,
		// the imported session's first claim replays its whole journal).
		var d lt.ContextCompactedData
		if err := json.Unmarshal(data, &d); err != nil {
			return fmt.Errorf("%s: %w", by, err)
		}
		if d.Snapshot != nil {
			r.addBlob(d.Snapshot.SHA256, by)
		}
	}
	return nil
}

// doc records what a projection row references: an artifact's content, a
// checkpoint's snapshot.
func (r *refs) doc(kind store.DocKind, row *store.DocRow) error {
	by := fmt.Sprintf("session %s %s %s", row.SessionID, kind, row.ID)
	switch kind {
	case store.DocArtifact:
		var a lt.Artifact
		if err := json.Unmarshal(row.Doc, &a); err != nil {
			return fmt.Errorf("%s: %w", by, err)
		}
		if a.SHA256 != "" {
			r.addBlob(a.SHA256, by)
		}
	case store.DocCheckpoint:
		var c lt.Checkpoint
		if err := json.Unmarshal(row.Doc, &c); err != nil {
			return fmt.Errorf("%s: %w", by, err)
		}
		r.addSnapshot(c.Snapshot, by)
	}
	return nil
}

// expand walks every snapshot (snapshot.Load checks each tree against its
// digest) and adds its root tree, every directory's tree and every file's
// chunks to the blobs.
func (r *refs) expand(ctx context.Context, b snapshot.Blobs) error {
	for _, id := range slices.Sorted(maps.Keys(r.snapshots)) {
		by := r.snapshots[id]
		m, err := snapshot.Load(ctx, b, id)
		if err != nil {
			return fmt.Errorf("%s: workspace snapshot %s: %w", by, id, err)
		}
		snapBy := by + ", snapshot " + id
		r.addBlob(id, snapBy)
		for _, e := range m.Entries {
			switch {
			case e.Type == snapshot.TypeDir:
				r.addBlob(e.SHA256, snapBy)
			case e.Type != snapshot.TypeFile:
			case len(e.Chunks) > 0:
				for _, c := range e.Chunks {
					r.addBlob(c.SHA256, snapBy)
				}
			case e.Size > 0:
				r.addBlob(e.SHA256, snapBy)
			}
		}
	}
	return nil
}

// sorted returns the referenced blobs in digest order.
func (r *refs) sorted() []string {
	return slices.Sorted(maps.Keys(r.blobs))
}
