-- 007_tree_budgets: the shared budget ledger of a tree of sub-agents.
--
-- One row per tree (keyed by its root session) holds the root's hard limits,
-- what the tree's settled calls spent, and the largest model call settled
-- (the estimate of the next one). Each call of the tree reserves its
-- estimate in tree_reservations before it starts and is settled in the
-- transaction of the append that journals it. A reservation counts only
-- while its session's lease is the one it was made under (lease_owner,
-- lease_epoch): a crashed worker's reservation ends when the session is
-- claimed again. Amounts are REAL (dollars) or INTEGER (tokens, calls).
CREATE TABLE tree_budgets (
    root_id           TEXT    NOT NULL PRIMARY KEY,
    limit_cost_usd    REAL    NOT NULL DEFAULT 0,
    limit_tokens      INTEGER NOT NULL DEFAULT 0,
    limit_model_calls INTEGER NOT NULL DEFAULT 0,
    limit_tool_calls  INTEGER NOT NULL DEFAULT 0,
    spent_cost_usd    REAL    NOT NULL DEFAULT 0,
    spent_tokens      INTEGER NOT NULL DEFAULT 0,
    spent_model_calls INTEGER NOT NULL DEFAULT 0,
    spent_tool_calls  INTEGER NOT NULL DEFAULT 0,
    max_call_cost_usd REAL    NOT NULL DEFAULT 0,
    max_call_tokens   INTEGER NOT NULL DEFAULT 0,
    settled_calls     INTEGER NOT NULL DEFAULT 0,
    updated_at        INTEGER NOT NULL
) STRICT;

CREATE TABLE tree_reservations (
    root_id     TEXT    NOT NULL REFERENCES tree_budgets (root_id),
    id          TEXT    NOT NULL,
    session_id  TEXT    NOT NULL,
    lease_owner TEXT    NOT NULL,
    lease_epoch INTEGER NOT NULL,
    kind        TEXT    NOT NULL,
    exclusive   INTEGER NOT NULL DEFAULT 0,
    cost_usd    REAL    NOT NULL DEFAULT 0,
    tokens      INTEGER NOT NULL DEFAULT 0,
    model_calls INTEGER NOT NULL DEFAULT 0,
    tool_calls  INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (root_id, id)
) STRICT, WITHOUT ROWID;
