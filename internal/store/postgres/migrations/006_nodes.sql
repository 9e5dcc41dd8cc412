-- 006_nodes: the API addresses each node announces, so that every node
-- refuses them to its sessions (a session never reaches the control plane,
-- whichever node serves it). addrs lists "host:port".

CREATE TABLE nodes (
    id           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    addrs        TEXT[]           NOT NULL,
    announced_at TIMESTAMPTZ      NOT NULL
);
