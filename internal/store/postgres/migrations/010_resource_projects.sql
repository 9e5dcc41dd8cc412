-- 010_resource_projects: agents, secrets and webhook endpoints belong to a
-- project; every existing row goes to the default project.
--
-- Agent names and secret names are unique per project, so the primary keys
-- of agents and secrets gain the project. A delivery records the project
-- of its session, so that listing deliveries can keep to a project after
-- the endpoint that received them is deleted.

ALTER TABLE agents ADD COLUMN project TEXT COLLATE "C" NOT NULL DEFAULT 'default';
ALTER TABLE agents DROP CONSTRAINT agents_pkey;
ALTER TABLE agents ADD PRIMARY KEY (project, name, version);

ALTER TABLE secrets ADD COLUMN project TEXT COLLATE "C" NOT NULL DEFAULT 'default';
ALTER TABLE secrets DROP CONSTRAINT secrets_pkey;
ALTER TABLE secrets ADD PRIMARY KEY (project, name);

ALTER TABLE webhook_endpoints ADD COLUMN project TEXT COLLATE "C" NOT NULL DEFAULT 'default';
CREATE INDEX webhook_endpoints_project ON webhook_endpoints (project);

ALTER TABLE webhook_deliveries ADD COLUMN project TEXT COLLATE "C" NOT NULL DEFAULT 'default';
CREATE INDEX webhook_deliveries_project ON webhook_deliveries (project, pos);
