-- 016_claim_affinity: a session handed to another node. A node whose
-- worker claimed a session that needs a runner connected to another node
-- gives the lease back naming that node: until claim_node_until only that
-- node claims the session, after it (the node died, say) any node does. A
-- claim clears both. claim_node_until is unix microseconds.
ALTER TABLE sessions ADD COLUMN claim_node TEXT;
ALTER TABLE sessions ADD COLUMN claim_node_until INTEGER;
-- runners.sessions: the sessions whose environments are open on the
-- runner, as the node holding its connection last recorded them (GET
-- /v1/runners), a JSON array.
ALTER TABLE runners ADD COLUMN sessions TEXT NOT NULL DEFAULT '[]';
