package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ownBatch bounds the digests of one transaction of BlobOwn.
const ownBatch = 2000

// BlobOwn records that project owns the blobs digests; see store.Store.
func (s *Store) BlobOwn(ctx context.Context, project string, digests []string) error {
	return s.blobOwn(ctx, project, digests, false)
}

// BlobOwnTrees records that project owns the trees digests and all they
// reach; see store.Store.
func (s *Store) BlobOwnTrees(ctx context.Context, project string, digests []string) error {
	return s.blobOwn(ctx, project, digests, true)
}

// BlobOwnAll records blobs then trees (BlobOwn, BlobOwnTrees) in one
// statement, one transaction, when they fit in one batch; see
// snapshot.BatchOwners.
func (s *Store) BlobOwnAll(ctx context.Context, project string, blobs, trees []string) error {
	if len(blobs)+len(trees) > ownBatch {
		if err := s.blobOwn(ctx, project, blobs, false); err != nil {
			return err
		}
		return s.blobOwn(ctx, project, trees, true)
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
	// One row a digest (a digest in both lists is a tree's): a statement
	// may not update a row twice.
	kinds := make(map[string]bool, len(blobs)+len(trees))
	for _, d := range blobs {
		kinds[d] = false
	}
	for _, d := range trees {
		kinds[d] = true
	}
	digests, isTree := make([]string, 0, len(kinds)), make([]bool, 0, len(kinds))
	for d, t := range kinds {
		digests, isTree = append(digests, d), append(isTree, t)
	}
	_, err := s.exec(ctx, `INSERT INTO blob_owners (project, sha256, tree)
SELECT $1, d, t FROM unnest($2::text[], $3::bool[]) AS u(d, t)
ON CONFLICT (project, sha256) DO UPDATE SET tree = true WHERE excluded.tree AND NOT blob_owners.tree`, project, digests, isTree)
	if err != nil {
		return fmt.Errorf("own %d blobs and %d trees in project %q: %w", len(blobs), len(trees), project, err)
	}
	return nil
}

func (s *Store) blobOwn(ctx context.Context, project string, digests []string, tree bool) error {
	if err := s.checkOwners(project, digests); err != nil {
		return fmt.Errorf("own blobs: %w", err)
	}
	for start := 0; start < len(digests); start += ownBatch {
		batch := digests[start:min(start+ownBatch, len(digests))]
		// One statement for the batch: the order within it does not
		// matter, the transaction commits it whole.
		_, err := s.exec(ctx, `INSERT INTO blob_owners (project, sha256, tree)
SELECT $1, d, $3 FROM unnest($2::text[]) AS d
ON CONFLICT (project, sha256) DO UPDATE SET tree = true WHERE excluded.tree AND NOT blob_owners.tree`, project, batch, tree)
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
	if len(digests) == 0 {
		return owned, nil
	}
	err := s.query(ctx, func(rows pgx.Rows) error {
		var d string
		var tree bool
		if err := rows.Scan(&d, &tree); err != nil {
			return err
		}
		owned[d] = tree || !kinds
		return nil
	}, `SELECT sha256, tree FROM blob_owners WHERE project = $1 AND sha256 = ANY($2::text[])`, project, digests)
	if err != nil {
		return nil, fmt.Errorf("blobs owned by project %q: %w", project, err)
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
