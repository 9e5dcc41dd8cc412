-- 015_blob_owners: which project owns which snapshot blob (PostgreSQL
-- dialect of the SQLite driver's 015_blob_owners, which says why). A row
-- for a tree is written only once every blob the tree reaches has its
-- row too, so a walk that meets an owned tree stops there.
--
-- Snapshots journaled before this migration: the root of every
-- checkpoint's snapshot is recorded as owned by its session's project.
-- Only the roots: the blobs under them get their rows at the first
-- restore of the snapshot, which always walks below the root.
CREATE TABLE blob_owners (
    project TEXT COLLATE "C" NOT NULL,
    sha256  TEXT COLLATE "C" NOT NULL,
    -- tree: the blob was read as a tree, and every blob it reaches has its
    -- row (snapshot.Claim): only such a row stands for what the tree
    -- reaches. A blob recorded as a file's bytes (or sent by a runner and
    -- not walked) is owned for itself alone, whatever its bytes look like.
    tree    BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (project, sha256)
);

INSERT INTO blob_owners (project, sha256, tree)
SELECT DISTINCT s.project, c.doc->>'snapshot', true FROM checkpoints c JOIN sessions s ON s.id = c.session_id
WHERE length(c.doc->>'snapshot') = 64
ON CONFLICT DO NOTHING;
