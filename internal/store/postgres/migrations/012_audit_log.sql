-- 012_audit_log: the audit log (PostgreSQL dialect of the SQLite driver's
-- 012_audit_log): every request that changed state or was refused, with who
-- made it.
--
-- Append-only: seq comes from an identity sequence (never given twice, and
-- growing in the order the entries were appended on every node), and a
-- trigger refuses any UPDATE. Only the retention prune deletes, by age (the
-- time index); two nodes pruning at once delete each row once. Who called
-- is key_id, actor_name and actor_role (empty when the request
-- authenticated as no one); key_prefix is the first characters of a
-- refused token, never the token. targets is a JSON object of the route's
-- path values.
CREATE TABLE audit_log (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time       TIMESTAMPTZ NOT NULL,
    key_id     TEXT        NOT NULL,
    actor_name TEXT        NOT NULL,
    actor_role TEXT        NOT NULL,
    key_prefix TEXT        NOT NULL,
    remote     TEXT        NOT NULL,
    method     TEXT        NOT NULL,
    route      TEXT        NOT NULL,
    targets    JSONB       NOT NULL,
    status     INTEGER     NOT NULL,
    request_id TEXT        NOT NULL
);

CREATE INDEX audit_log_time ON audit_log (time);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END;
$$;

CREATE TRIGGER audit_log_append_only BEFORE UPDATE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
