package longhaultype

import "time"

// Runner is a connected runner: a self-managed environment (`longhaul
// runner`) that dialled the server with a runner key (GET /v1/runners).
type Runner struct {
	// Name is the runner's name, unique within its project.
	Name    string `json:"name"`
	Project string `json:"project"`
	// Labels are what an agent's environment.runner.labels match.
	Labels []string `json:"labels"`
	// Capacity is how many sessions' environments the runner holds open
	// at once (a session past it waits for one to close), and how many
	// calls it runs at once.
	Capacity int `json:"capacity"`
	// Version is the runner's build, as it announced it.
	Version string `json:"version"`
	// Protocol is the version of the runner protocol it speaks: a server
	// refuses a runner older than the protocol it needs.
	Protocol int `json:"protocol"`
	// Node is the id of the server node the runner is connected to.
	Node string `json:"node"`
	// KeyID is the API key it connected with.
	KeyID       string    `json:"key_id"`
	ConnectedAt time.Time `json:"connected_at"`
	// LastSeenAt is the connection's last sign of life; a runner not seen
	// for a while (its node died) is no longer listed.
	LastSeenAt time.Time `json:"last_seen_at"`
	// Sessions are the sessions whose environments are open on the
	// runner, as of its node's last check of the connection.
	Sessions []string `json:"sessions"`
}
