-- 010_resource_projects: agents, secrets and webhook endpoints belong to a
-- project; every existing row goes to the default project.
--
-- Agent names and secret names are unique per project, so the primary keys
-- of agents and secrets gain the project: SQLite cannot change a primary
-- key in place, so both tables are rebuilt (nothing references them). The
-- columns are listed by name, so that a column another migration adds
-- before this one must be added here too. A delivery records the project
-- of its session, so that listing deliveries can keep to a project after
-- the endpoint that received them is deleted.

CREATE TABLE agents_010 (
    project    TEXT    NOT NULL DEFAULT 'default',
    name       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    spec       TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (project, name, version)
) STRICT;
INSERT INTO agents_010 (project, name, version, spec, created_at)
    SELECT 'default', name, version, spec, created_at FROM agents;
DROP TABLE agents;
ALTER TABLE agents_010 RENAME TO agents;

CREATE TABLE secrets_010 (
    project    TEXT    NOT NULL DEFAULT 'default',
    name       TEXT    NOT NULL,
    ciphertext BLOB    NOT NULL,
    nonce      BLOB    NOT NULL,
    key_id     TEXT    NOT NULL,
    hosts      TEXT    NOT NULL,
    inject     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (project, name)
) STRICT;
INSERT INTO secrets_010 (project, name, ciphertext, nonce, key_id, hosts, inject, created_at, updated_at)
    SELECT 'default', name, ciphertext, nonce, key_id, hosts, inject, created_at, updated_at FROM secrets;
DROP TABLE secrets;
ALTER TABLE secrets_010 RENAME TO secrets;

ALTER TABLE webhook_endpoints ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
CREATE INDEX webhook_endpoints_project ON webhook_endpoints (project);

ALTER TABLE webhook_deliveries ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
CREATE INDEX webhook_deliveries_project ON webhook_deliveries (project, pos);
