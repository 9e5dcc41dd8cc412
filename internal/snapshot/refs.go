package snapshot

import "context"

// TreeRefs decodes the tree blob data (the root tree of a snapshot when
// root) and returns the digests it refers to: the trees of its
// subdirectories and the content blobs of its files. A server that hands
// out blobs only along a snapshot's references (a runner's restore) uses
// it to learn, tree by tree, which digests the snapshot reaches, without
// loading the whole snapshot first.
func TreeRefs(data []byte, root bool) (trees, contents []string, err error) {
	t, err := decodeTree(data, root)
	if err != nil {
		return nil, nil, err
	}
	for i := range t.Entries {
		e := &t.Entries[i]
		switch e.Type {
		case TypeDir:
			trees = append(trees, e.Tree)
		case TypeFile:
			for _, c := range e.chunks() {
				contents = append(contents, c.SHA256)
			}
		}
	}
	return trees, contents, nil
}

// ManyBlobs is a Blobs that answers BlobHas for many digests in one call
// (a runner's blobs, one round trip to the server per batch): Take asks it
// once per batch of blobs to store.
type ManyBlobs interface {
	BatchBlobs
	// BlobHasMany returns the digests of digests the store lacks.
	BlobHasMany(ctx context.Context, digests []string) (missing map[string]bool, err error)
}
