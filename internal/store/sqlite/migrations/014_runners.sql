-- 014_runners: the runners (self-managed environments, `longhaul runner`)
-- connected to the nodes, each recorded by the node that holds its
-- connection, so that every node lists them. A runner is named within its
-- project; a newer connection under the same name replaces the row
-- (conn_id says which connection holds it). seen_at is the connection's
-- last sign of life: a row a dead node left is listed no longer once it is
-- stale. labels is a JSON array; times are unix microseconds.
CREATE TABLE runners (
    project      TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    conn_id      TEXT    NOT NULL,
    key_id       TEXT    NOT NULL,
    node         TEXT    NOT NULL,
    labels       TEXT    NOT NULL,
    capacity     INTEGER NOT NULL,
    version      TEXT    NOT NULL,
    connected_at INTEGER NOT NULL,
    seen_at      INTEGER NOT NULL,
    PRIMARY KEY (project, name)
) STRICT;
