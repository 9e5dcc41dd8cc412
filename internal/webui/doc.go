// Package webui is Longhaul's web UI: hand-written HTML, CSS and JavaScript
// modules embedded in the binary with go:embed and served by internal/server
// at / (the page) and /ui/{version}/... (its assets). Nothing is built at run
// time and nothing is fetched from another origin: the UI works offline and
// speaks only the public HTTP API under /v1, with the same API keys.
//
// The pages are Sessions (list, filters, search, paging), Session (a live
// timeline over the event stream, budget meters, the effect ledger,
// checkpoints and forks, artifacts with previews, the trace as a waterfall,
// cancel, follow-up turns and the review of the final artifact), Inbox
// (every pending required action across sessions, with a form for each
// type) and Reports (per-task records, totals and a chart over time).
//
// It knows who is signed in (GET /v1/me: name, role, project, and the
// Service methods the role may call), says so in the header, and offers
// only the controls the role may use (js/identity.js: can("DecideAction"),
// can("Pause"), …); the server checks every request regardless. Every
// decision shows its actor ("by alice (approver)") where the server
// recorded one: decided actions in the inbox and on the session page, the
// timeline's events, the session's creator.
//
// Invariants it keeps:
//
//   - Every response carries a strict Content-Security-Policy (scripts,
//     styles, fetches and images from this origin only, plus blob: images
//     for artifact previews; no inline script or style, no framing), so an
//     artifact or a tool output shown in the page can never run as the
//     API's origin. The JavaScript builds the DOM with text nodes and never
//     assigns HTML strings.
//   - Assets are addressed by a version, the SHA-256 of every embedded file
//     (names and bytes): /ui/{version}/js/main.js. A versioned asset is
//     immutable and cached for a year; the page at / is revalidated on every
//     load (no-cache with an ETag), so a new binary's UI is picked up on the
//     next load and never mixed with an old one's assets. Every response
//     has an ETag, and If-None-Match gets a 304.
//   - The static files hold no secret and no data: they are served to
//     anyone, and every piece of data comes from /v1, which applies the
//     server's access rule. The API key a person types is kept in the tab's
//     sessionStorage and sent as a bearer token; the event stream is read
//     with fetch() (EventSource cannot send headers), so a key is never put
//     in a URL.
//
// It imports the standard library only. Who may import it: internal/server
// and tests.
package webui
