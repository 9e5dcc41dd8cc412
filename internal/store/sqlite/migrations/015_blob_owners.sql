-- 015_blob_owners: which project owns which snapshot blob. Blobs are shared
-- by content, so a digest alone proves nothing: a runner that learnt
-- another project's snapshot id must not get that project's files by
-- naming it (in a tree of its own snapshot, or in blob.has and blob.get).
-- A project owns a blob when it got the bytes legitimately: the server
-- took them from the project's workspace, the project's runner sent them,
-- an import brought them, or a restore of a snapshot it owns reached them.
--
-- A row for a tree is written only once every blob the tree reaches has
-- its row too (snapshot.Claim), so a walk that meets an owned tree stops
-- there: the cost of recording a snapshot is that of its new trees.
--
-- Snapshots journaled before this migration: the root of every
-- checkpoint's snapshot is recorded as owned by its session's project (the
-- snapshots the project's own checkpoints name; nothing else is known to
-- be the project's). Only the roots: the blobs under them get their rows
-- at the first restore of the snapshot, which always walks below the root
-- (a restore reads every tree anyway), so a runner's blob.has answers
-- "missing" for them until then and the runner sends their bytes again,
-- once.
CREATE TABLE blob_owners (
    project TEXT NOT NULL,
    sha256  TEXT NOT NULL,
    -- tree: the blob was read as a tree, and every blob it reaches has its
    -- row (snapshot.Claim): only such a row stands for what the tree
    -- reaches. A blob recorded as a file's bytes (or sent by a runner and
    -- not walked) is owned for itself alone, whatever its bytes look like:
    -- a file whose bytes parse as a tree naming another project's digests
    -- must not carry them into this project.
    tree    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (project, sha256)
) STRICT, WITHOUT ROWID;

INSERT OR IGNORE INTO blob_owners (project, sha256, tree)
SELECT s.project, json_extract(c.doc, '$.snapshot'), 1 FROM checkpoints c JOIN sessions s ON s.id = c.session_id
WHERE json_valid(c.doc) AND length(json_extract(c.doc, '$.snapshot')) = 64;
