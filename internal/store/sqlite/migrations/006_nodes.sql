-- 006_nodes: the API addresses each node announces, so that every node
-- refuses them to its sessions (a session never reaches the control plane,
-- whichever node serves it). addrs is a JSON array of "host:port".

CREATE TABLE nodes (
    id           TEXT    NOT NULL PRIMARY KEY,
    addrs        TEXT    NOT NULL,
    announced_at INTEGER NOT NULL
) STRICT;
