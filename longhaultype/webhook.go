package longhaultype

import "time"

// Webhook notification types (API.md "Webhooks").
const (
	WebhookSessionRequiresAction = "session.requires_action"
	WebhookSessionIdle           = "session.idle"
	WebhookSessionCompleted      = "session.completed"
	WebhookSessionFailed         = "session.failed"
	WebhookSessionCancelled      = "session.cancelled"
)

// WebhookEventTypes lists every notification type, in documentation order.
var WebhookEventTypes = []string{
	WebhookSessionRequiresAction, WebhookSessionIdle, WebhookSessionCompleted,
	WebhookSessionFailed, WebhookSessionCancelled,
}

// WebhookNotification is the thin body POSTed to a webhook: the receiver
// reads the session (or its events after EventSeq) for the details.
type WebhookNotification struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	EventSeq  int64  `json:"event_seq"`
	// RootSessionID is set on a sub-agent's notifications sent to its
	// root's webhook_url: the root of its tree, the session the receiver
	// created (the root's own notifications, and those sent to endpoints,
	// carry none).
	RootSessionID string `json:"root_session_id,omitempty"`
}

// CreateWebhookEndpointRequest is the body of POST /v1/webhooks/endpoints.
// Events filters the notification types; empty sends every type.
type CreateWebhookEndpointRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events,omitempty"`
	// Project: only an admin key may name one (default DefaultProject);
	// the endpoint receives the events of that project's sessions only.
	Project string `json:"project,omitempty"`
}

// WebhookEndpoint is a server-wide endpoint. Secret ("whsec_...") is set only
// in the 201 response that created it.
type WebhookEndpoint struct {
	ID         string     `json:"id"`
	Project    string     `json:"project"`
	URL        string     `json:"url"`
	Events     []string   `json:"events"`
	Secret     string     `json:"secret,omitempty"`
	Disabled   bool       `json:"disabled"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
}

// WebhookDelivery is one notification to one target, with its attempts.
// EndpointID is empty for a session's own webhook_url.
type WebhookDelivery struct {
	ID            string                   `json:"id"`
	EndpointID    string                   `json:"endpoint_id,omitempty"`
	SessionID     string                   `json:"session_id"`
	URL           string                   `json:"url"`
	Type          string                   `json:"type"`
	EventSeq      int64                    `json:"event_seq"`
	Status        string                   `json:"status"`
	NextAttemptAt *time.Time               `json:"next_attempt_at,omitempty"`
	CreatedAt     time.Time                `json:"created_at"`
	Attempts      []WebhookDeliveryAttempt `json:"attempts"`
}

// WebhookDeliveryAttempt is one recorded attempt. StatusCode is 0 when no
// response arrived (Error says why).
type WebhookDeliveryAttempt struct {
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code"`
	Error      string    `json:"error,omitempty"`
	DurationMS int64     `json:"duration_ms"`
}

// ListWebhookDeliveriesParams pages GET /v1/webhooks/deliveries.
type ListWebhookDeliveriesParams struct {
	Cursor string
	Limit  int
	// Project keeps to the deliveries of one project's sessions: an
	// admin's filter ("": every project); a key of one project sees its
	// own only.
	Project string
}
