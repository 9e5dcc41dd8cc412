// Package webhook sends outgoing webhooks: thin notifications
// ({"type", "session_id", "event_seq"}) about sessions, to a session's own
// webhook_url and to the server-wide endpoints, signed per the Standard
// Webhooks specification.
//
// Invariants:
//   - The journal is the source of truth. The Dispatcher derives
//     notifications from a session's events after a durable per-session
//     cursor, and inserts them into the outbox in the same store transaction
//     that moves the cursor, so a crash loses none and a re-scan enqueues
//     none twice: a delivery's id (the webhook-id) is derived from (target,
//     session, event seq, type) and is unique in the outbox.
//   - Every attempt of one delivery carries the same webhook-id and is
//     recorded (status code, error, duration, time). Retries follow the
//     specification's schedule (immediately, 5 s, 5 min, 30 min, 2 h, 5 h,
//     10 h, 10 h), later when Retry-After asks for more; a 2xx ends them; a
//     410 disables the target (the endpoint, or the session's webhook_url).
//     An attempt cut short by a crash or Stop is not one: nothing records
//     it, so the delivery is still due and the next start sends it at once,
//     with the same webhook-id.
//   - Requests dial through an egress policy that refuses private,
//     loopback, link-local and metadata addresses unless the server's
//     configuration lists them, so a user-supplied URL cannot reach the
//     server's own network. Redirects are not followed.
//   - An endpoint is notified of every event at or after its creation and
//     of none before, so creating one does not replay history. (A scan
//     reads the endpoints after the events it turns into notifications, so
//     an endpoint created during a scan misses none.)
//   - Signing secrets are "whsec_" plus base64 of 24 random bytes; an
//     endpoint's secret is shown once. During a rotation an endpoint has
//     several, and each request carries one signature per secret.
//
// The node (cmd/longhaul) starts a Dispatcher and serves its API through
// the server's WebhookBackend; nothing else imports this package.
package webhook
