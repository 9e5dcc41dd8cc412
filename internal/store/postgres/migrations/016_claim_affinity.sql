-- 016_claim_affinity: a session handed to another node (PostgreSQL
-- dialect of the SQLite driver's 016_claim_affinity). A node whose worker
-- claimed a session that needs a runner connected to another node gives
-- the lease back naming that node: until claim_node_until only that node
-- claims the session, after it (the node died, say) any node does. A
-- claim clears both.
ALTER TABLE sessions ADD COLUMN claim_node TEXT;
ALTER TABLE sessions ADD COLUMN claim_node_until TIMESTAMPTZ;
-- runners.sessions: the sessions whose environments are open on the
-- runner, as the node holding its connection last recorded them (GET
-- /v1/runners).
ALTER TABLE runners ADD COLUMN sessions TEXT[] NOT NULL DEFAULT '{}';
