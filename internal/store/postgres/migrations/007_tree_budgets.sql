-- 007_tree_budgets: the shared budget ledger of a tree of sub-agents
-- (PostgreSQL dialect of the SQLite driver's 007_tree_budgets).
--
-- One row per tree (keyed by its root session) holds the root's hard limits,
-- what the tree's settled calls spent, and the largest model call settled
-- (the estimate of the next one). Each call of the tree reserves its
-- estimate in tree_reservations before it starts, with the tree's row
-- locked (FOR UPDATE), so reservations made on different nodes are decided
-- one after another; each call is settled in the transaction of the append
-- that journals it. A reservation counts only while its session's lease is
-- the one it was made under (lease_owner, lease_epoch): a crashed worker's
-- reservation ends when the session is claimed again.
CREATE TABLE tree_budgets (
    root_id           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    limit_cost_usd    DOUBLE PRECISION NOT NULL DEFAULT 0,
    limit_tokens      BIGINT           NOT NULL DEFAULT 0,
    limit_model_calls BIGINT           NOT NULL DEFAULT 0,
    limit_tool_calls  BIGINT           NOT NULL DEFAULT 0,
    spent_cost_usd    DOUBLE PRECISION NOT NULL DEFAULT 0,
    spent_tokens      BIGINT           NOT NULL DEFAULT 0,
    spent_model_calls BIGINT           NOT NULL DEFAULT 0,
    spent_tool_calls  BIGINT           NOT NULL DEFAULT 0,
    max_call_cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    max_call_tokens   BIGINT           NOT NULL DEFAULT 0,
    settled_calls     BIGINT           NOT NULL DEFAULT 0,
    updated_at        TIMESTAMPTZ      NOT NULL
);

CREATE TABLE tree_reservations (
    root_id     TEXT COLLATE "C" NOT NULL REFERENCES tree_budgets (root_id),
    id          TEXT COLLATE "C" NOT NULL,
    session_id  TEXT COLLATE "C" NOT NULL,
    lease_owner TEXT COLLATE "C" NOT NULL,
    lease_epoch BIGINT           NOT NULL,
    kind        TEXT             NOT NULL,
    exclusive   BOOLEAN          NOT NULL DEFAULT false,
    cost_usd    DOUBLE PRECISION NOT NULL DEFAULT 0,
    tokens      BIGINT           NOT NULL DEFAULT 0,
    model_calls BIGINT           NOT NULL DEFAULT 0,
    tool_calls  BIGINT           NOT NULL DEFAULT 0,
    created_at  TIMESTAMPTZ      NOT NULL,
    PRIMARY KEY (root_id, id)
);
