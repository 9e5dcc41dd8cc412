// Package client is the Go client of Longhaul's HTTP API (API.md): one
// typed method per endpoint, taking and returning the wire types of
// longhaultype; StreamEvents, which follows a session's journal live (an
// event's payload decodes to its longhaultype type: Event.DecodeData);
// StreamTreeEvents, which follows a session and all its sub-agents; and
// AllActions and AllWebhookDeliveries, which page through the inbox of
// required actions and the webhook deliveries; ListFiles, GetFile,
// PutFile and DeleteFile (and their IfMatch forms, conditional on the
// bytes read), a person's take-over of a workspace (an upload
// is the one request body sent as application/octet-stream); and
// EnsureAgent, which adds an agent version only when the spec changed
// (longhaultype.SameAgentSpec, the server's rule). Every route of the API has
// its method, except GET /metrics (Prometheus text, for a scraper).
//
// Invariants it keeps:
//
//   - Every POST carries an Idempotency-Key: a random one per call, or the
//     caller's (WithIdempotencyKey). All retries of one call send the same
//     key, which is what makes retrying a POST after a lost response safe.
//   - Transient failures (connection refused or reset, 429, 502, 503, 504)
//     are retried with capped exponential backoff; anything else is
//     returned at once. Every non-2xx response is an *APIError carrying
//     the API's status, error code, message and field (reach it with
//     errors.As, or test it with IsNotFound, IsConflict and HasCode).
//   - StreamEvents yields each event with seq > after exactly once and in
//     order: it resumes by Last-Event-ID across disconnects and server
//     restarts, drops replayed events and back-fills gaps with ListEvents.
//     StreamTreeEvents does the same per session of the tree, resuming with
//     the tree's cursor (longhaultype.TreeCursor) of the last event yielded.
//
// It imports the standard library, longhaultype and a UUID generator only,
// never server code, so any program may import it; the CLI talks HTTP
// through it alone. Who may import it: any package.
//
// Usage:
//
//	c, err := client.New("http://127.0.0.1:8080", &client.Config{APIKey: key})
//	if err != nil {
//		return err
//	}
//	s, err := c.CreateSession(ctx, &longhaultype.CreateSessionRequest{
//		Agent: "researcher",
//		Input: "Write a competitor brief for ACME",
//	})
//	if err != nil {
//		return err
//	}
//	for ev, err := range c.StreamEvents(ctx, s.ID, 0) {
//		if err != nil {
//			return err // the session is gone, or ctx ended
//		}
//		fmt.Println(ev.Seq, ev.Type)
//		if ev.Type == longhaultype.EventActionRequired {
//			break // decide it with c.ListActions and c.DecideAction
//		}
//	}
package client
