// Package server is Longhaul's HTTP API (API.md): JSON endpoints for
// sessions, turns, events, required actions, effects, checkpoints, artifacts,
// blobs, agents and task reports, a server-sent event stream of each
// session's journal, the liveness and readiness probes and the metrics.
//
// It serves a Backend, the application service (app.Service, implemented
// by app.App): a handler decodes the request, calls one method and encodes
// the answer; the use cases themselves (a session's tree, following
// journals, paging, defaults) live in internal/app, shared with the Go
// library. The server keeps nothing of its own but idempotency records,
// which it stores through an IdempotencyStore (store.Store satisfies it).
//
// Invariants it keeps:
//
//   - Every error response has the shape {"error":{"code","message","field"}}
//     (longhaultype.ErrorResponse), 404 and 405 from the router included.
//     Handlers return errors and one function writes them: an
//     *apierror.Error is shown as it is; anything else is a 500 "internal
//     error" whose cause goes to the log only. A panicking handler is
//     recovered, logged and answered with a 500; the server keeps running.
//   - Request bodies are decoded strictly: unknown fields, wrong types,
//     malformed JSON, empty bodies, trailing data, a key given twice in one
//     object (for a struct, in any case: encoding/json would let the second
//     overwrite the first) and bytes that are not UTF-8 (or an escaped lone
//     surrogate) are 400s naming the field (a dotted path such as
//     "agent_spec.tools[1].effect") or the byte offset; bodies over
//     Config.MaxBodyBytes are 413s. One body can be read only one way
//     (internal/jsonstrict).
//     The one body that is not JSON is a person's file upload (PUT
//     /v1/sessions/{id}/files/{path}, files.go): raw bytes sent as
//     application/octet-stream, bounded by Config.MaxFileBytes.
//   - A POST that creates or decides and carries an Idempotency-Key runs at
//     most once per (scope, key) on this server, and a repeat with the same
//     body gets the first 2xx response back byte for byte; the same key with
//     another body is a 409.
//   - Access control (auth.go): with Config.APIKeys set, every /v1/ request
//     needs "Authorization: Bearer <key>", a bootstrap key (an admin) or a
//     key of the store (Config.Keys, read on every request, so a
//     revocation holds at once on every node); with no keys, /v1/ accepts
//     only loopback peers (127.0.0.0/8, ::1), as an admin named "local"
//     or the stored key their token names, and answers anyone else 403.
//     The check reads the TCP peer address, so a reverse proxy on the same
//     host makes every request look local: configure keys behind a proxy,
//     or name it. Single sign-on (sso.go): a peer in
//     Config.TrustedProxies that names a user in
//     Config.TrustedProxyHeader, with no bearer key, is that user of
//     Config.ProxyUsers (403 for one not listed); the header is ignored
//     from any other peer, and a trusted proxy is never the "local" admin.
//     The caller goes into the request's context (app.WithCaller); each
//     /v1 route names the Service method it calls, and app.Allow checks
//     the caller's role against app.Permissions before the handler reads
//     the request (403 otherwise). /healthz and /readyz are always open.
//     GET /metrics (when Config.Metrics is set) is under the /v1 access
//     rule, for admins only (the metrics span every project), unless
//     Config.MetricsPublic opens it.
//   - No web page drives the API (origin.go): without keys (or with
//     Config.AllowedHosts) a Host that does not name this server is a 403
//     (DNS rebinding); in every mode a state-changing request from another
//     site (Sec-Fetch-Site, else Origin against Host and
//     Config.TrustedOrigins) or with a body that is not application/json
//     (application/octet-stream on the upload route alone) is a 403
//     naming the header. No CORS is ever granted.
//   - An event stream is exempt from http.Server's WriteTimeout, but each
//     of its writes must finish within Config.StreamWriteTimeout: a client
//     that stops reading loses its stream (deadline.go).
//   - The event stream sends each seq of the journal exactly once, in order,
//     from the resume point (Last-Event-ID, else ?after=, else 0), as
//     Backend.StreamEvents yields it (it watches before it reads, so nothing
//     appended in between is missed). The stream's errors of the request
//     (404, 400) come before its 200: app.WithOpened says when it is open.
//     A stream ends only when its client leaves or Shutdown is called;
//     register Shutdown with http.Server.RegisterOnShutdown so that
//     http.Server.Shutdown is not held open by streaming clients.
//   - With ?include=subagents the stream does the same for every session of
//     the tree below the session (at most 1,000), each frame's id being the
//     tree's cursor (longhaultype.TreeCursor): a sub-agent found at connect
//     by listing the tree, or later by its parent's subagent.spawned event,
//     is streamed from the cursor's seq for it or from its start, so none
//     of its events is lost. A tree past the bound is a 400, never a cut.
//
// It imports the standard library, longhaultype, internal/apierror,
// internal/jsonstrict (the strict reading of a body), internal/openapi
// (the document it serves at /v1/openapi.json), internal/app (for the
// interface it serves), internal/runner/hub (whose Hub takes the runners'
// connections, upgraded with github.com/coder/websocket: runners.go),
// internal/store (for the idempotency record and the store's sentinel
// errors), internal/freespace and internal/webui (the embedded web UI it
// serves at /); never a storage driver, nor the engine but through
// internal/app. Who may import it: internal/node and tests.
package server
