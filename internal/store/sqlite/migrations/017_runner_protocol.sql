-- 017_runner_protocol: the version of the runner protocol each connected
-- runner speaks (its Hello's protocol), listed with it (GET /v1/runners).
-- A row from before the column is a runner from before protocol versions:
-- protocol 1.
ALTER TABLE runners ADD COLUMN protocol INTEGER NOT NULL DEFAULT 1;
