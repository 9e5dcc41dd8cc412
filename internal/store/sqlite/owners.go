package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// ownedBatch bounds the digests of one read of BlobsOwned (a JSON array
// bound to one parameter, so one prepared statement serves every size);
// ownBatch those of one transaction of BlobOwn, which holds the writer
// (shared with the sessions' appends) for a few milliseconds at most.
const (
	ownedBatch = 1000
	ownBatch   = 2000
)

// BlobOwn records that project owns the blobs digests; see store.Store.
func (s *Store) BlobOwn(ctx context.Context, project string, digests []string) error {
	return s.blobOwn(ctx, project, digests, 0)
}

// BlobOwnTrees records that project owns the trees digests and all they
// reach; see store.Store.
func (s *Store) BlobOwnTrees(ctx context.Context, project string, digests []string) error {
	return s.blobOwn(ctx, project, digests, 1)
}

// BlobOwnAll records blobs then trees (BlobOwn, BlobOwnTrees) in one
// writer request, one commit, when they fit in one batch; see
// snapshot.BatchOwners.
func (s *Store) BlobOwnAll(ctx context.Context, project string, blobs, trees []string) error {
	if len(blobs)+len(trees) > ownBatch {
		if err := s.blobOwn(ctx, project, blobs, 0); err != nil {
			return err
		}
		return s.blobOwn(ctx, project, trees, 1)
	}
	if err := s.checkOwners(project, blobs); err != nil {
		return fmt.Errorf("own blobs: %w", err)
	}
	if err := s.checkOwners(project, trees); err != nil {
		return fmt.Errorf("own trees: %w", err)
	}
	if len(blobs)+len(trees) == 0 {
		return nil
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		for _, set := range []struct {
			digests []string
			tree    int
		}{{blobs, 0}, {trees, 1}} {
			for _, d := range set.digests {
				if _, err := w.exec(ownBlobSQL, project, d, set.tree); err != nil {
					return nil, fmt.Errorf("own blob %s: %w", d, mapErr(err))
				}
			}
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("own %d blobs and %d trees in project %q: %w", len(blobs), len(trees), project, err)
	}
	return nil
}

// ownBlobSQL records one digest's row: a blob owned for itself becomes
// owned as a tree, never the other way.
const ownBlobSQL = `INSERT INTO blob_owners (project, sha256, tree) VALUES (?, ?, ?)
ON CONFLICT (project, sha256) DO UPDATE SET tree = 1 WHERE excluded.tree = 1 AND blob_owners.tree = 0`

func (s *Store) blobOwn(ctx context.Context, project string, digests []string, tree int) error {
	if err := s.checkOwners(project, digests); err != nil {
		return fmt.Errorf("own blobs: %w", err)
	}
	if len(digests) == 0 {
		return nil
	}
	for start := 0; start < len(digests); start += ownBatch {
		batch := digests[start:min(start+ownBatch, len(digests))]
		err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
			for _, d := range batch {
				if _, err := w.exec(ownBlobSQL, project, d, tree); err != nil {
					return nil, fmt.Errorf("own blob %s: %w", d, mapErr(err))
				}
			}
			return nil, nil
		}})
		if err != nil {
			return fmt.Errorf("own %d blobs in project %q: %w", len(digests), project, err)
		}
	}
	return nil
}

// BlobsOwned returns which of digests project owns; see store.Store.
func (s *Store) BlobsOwned(ctx context.Context, project string, digests []string) (map[string]bool, error) {
	return s.blobsOwned(ctx, project, digests, false)
}

// BlobOwnership returns the digests project owns, true for a tree's row;
// see store.Store.
func (s *Store) BlobOwnership(ctx context.Context, project string, digests []string) (map[string]bool, error) {
	return s.blobsOwned(ctx, project, digests, true)
}

func (s *Store) blobsOwned(ctx context.Context, project string, digests []string, kinds bool) (map[string]bool, error) {
	if err := s.checkOwners(project, digests); err != nil {
		return nil, fmt.Errorf("blobs owned: %w", err)
	}
	owned := make(map[string]bool, len(digests))
	for start := 0; start < len(digests); start += ownedBatch {
		list, err := json.Marshal(digests[start:min(start+ownedBatch, len(digests))])
		if err != nil {
			return nil, err
		}
		err = s.query(ctx, func(rows *sql.Rows) error {
			var d string
			var tree bool
			if err := rows.Scan(&d, &tree); err != nil {
				return err
			}
			owned[d] = tree || !kinds
			return nil
		}, `SELECT sha256, tree FROM blob_owners WHERE project = ? AND sha256 IN (SELECT value FROM json_each(?))`, project, string(list))
		if err != nil {
			return nil, fmt.Errorf("blobs owned by project %q: %w", project, err)
		}
	}
	return owned, nil
}

// checkOwners checks the arguments of BlobOwn and BlobsOwned.
func (s *Store) checkOwners(project string, digests []string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	return checks.Owners(project, digests)
}
