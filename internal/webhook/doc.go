// Package webhook sends outgoing webhooks: thin notifications
// ({"type", "session_id", "event_seq"}) about sessions, to a session's own
// webhook_url (a sub-agent's root's) and to the server-wide endpoints,
// signed per the Standard Webhooks specification.
//
// Invariants:
//   - The journal is the source of truth. The Dispatcher derives
//     notifications from a session's events after a durable per-session
//     cursor, and inserts them into the outbox in the same store transaction
//     that moves the cursor, so a crash loses none and a re-scan enqueues
//     none twice: a delivery's id (the webhook-id) is derived from (target,
//     session, event seq, type) and is unique in the outbox.
//   - Every node runs a Dispatcher, and several may share one store. Their
//     scans of one session cannot enqueue anything twice or lose anything:
//     the cursor moves only from the value the scan read (else the store
//     says ErrConflict and writes nothing), and a scan that loses that race
//     re-reads the cursor and goes on from where the winner stopped.
//   - A delivery is sent only under a claim: a dispatcher claims due
//     deliveries (owner = its NodeID) for ClaimTTL, longer than an attempt
//     may last, and only as many as it can start at once. Claims are
//     disjoint, so no two nodes send one delivery at the same time. The
//     store records an attempt only from the delivery's current claimer,
//     which ends the claim, so each attempt number of a delivery is
//     recorded once, by the node that made it.
//   - Every attempt of one delivery carries the same webhook-id and is
//     recorded (status code, error, duration, time, node). Retries follow
//     the specification's schedule (immediately, 5 s, 5 min, 30 min, 2 h,
//     5 h, 10 h, 10 h), later when Retry-After asks for more; a 2xx ends
//     them; a 410 disables the target (the endpoint, or the session's
//     webhook_url).
//   - Delivery is at least once. An attempt cut short by a crash or Stop
//     is not one: nothing records it, and the delivery is sent again, with
//     the same webhook-id. After Stop, at once (Stop releases the claims of
//     the attempts it abandons); after a crash, when the claim runs out, by
//     any node, or at once when the node restarts with the same NodeID
//     (Start releases the claims its id holds). An attempt that outlasts
//     its claim (a stalled node) is refused by the store once another
//     claim has taken the delivery; the receiver may then see its
//     webhook-id twice, and deduplicates by it.
//   - A sub-agent has no webhook_url of its own: its notifications go to
//     its root's (found up the parent chain), signed with the root's secret
//     and naming the root (root_session_id), and a 410 to one disables the
//     root's URL. Its cursor stays its own. The URL was checked when the
//     root was created, so a sub-agent reaches nothing its root could not.
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
// The node (internal/node) starts a Dispatcher, with its node id as
// NodeID, and the application service (internal/app) serves its API; export
// makes signing secrets (NewSecret), and the application service serves
// the webhook use cases. Who may import it: internal/app, internal/export,
// internal/node and tests.
package webhook
