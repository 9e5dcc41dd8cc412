-- 012_audit_log: the audit log (internal/server audit.go): every request
-- that changed state or was refused, with who made it.
--
-- Append-only: seq is AUTOINCREMENT, so a number is never given twice even
-- after the newest entries are pruned, and a trigger refuses any UPDATE.
-- Only the retention prune deletes, by age (the time index). Who called is
-- key_id, actor_name and actor_role (empty when the request authenticated
-- as no one); key_prefix is the first characters of a refused token, never
-- the token. targets is a JSON object of the route's path values. Times are
-- unix microseconds.
CREATE TABLE audit_log (
    seq        INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    time       INTEGER NOT NULL,
    key_id     TEXT    NOT NULL,
    actor_name TEXT    NOT NULL,
    actor_role TEXT    NOT NULL,
    key_prefix TEXT    NOT NULL,
    remote     TEXT    NOT NULL,
    method     TEXT    NOT NULL,
    route      TEXT    NOT NULL,
    targets    TEXT    NOT NULL,
    status     INTEGER NOT NULL,
    request_id TEXT    NOT NULL
) STRICT;

CREATE INDEX audit_log_time ON audit_log (time);

CREATE TRIGGER audit_log_append_only BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
