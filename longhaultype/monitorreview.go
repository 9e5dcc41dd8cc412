package longhaultype

// The trajectory monitor's model: a second model that reads a summary of
// the session tree's trajectory and answers ok, warn or pause.

// Triggers of a model monitor's review.
const (
	// ReviewEverySteps: the periodic review, every MonitorSpec.EverySteps
	// steps of a turn.
	ReviewEverySteps = "every_steps"
	// ReviewBefore: the review before a call of an effect class listed in
	// MonitorSpec.Before, once its arguments are final.
	ReviewBefore = "before"
)

// Verdicts of a model monitor's review.
const (
	VerdictOK    = "ok"
	VerdictWarn  = "warn"
	VerdictPause = "pause"
)

// PurposeMonitor is the purpose of a model monitor's call
// (model.requested, model.failed).
const PurposeMonitor = "monitor"

// MonitorHeldData is the data of monitor.held: the session's running
// sub-agents, and theirs, were paused with it (their pause's parent) while
// the monitor action ActionID waits for a person; deciding it resumes
// them.
type MonitorHeldData struct {
	ActionID string `json:"action_id"`
}

// MonitorReviewedData is the data of monitor.reviewed: the model monitor
// read the trajectory and gave its verdict. A verdict it could not give (an
// answer that is not the expected JSON, a model error after retries, a
// budget spent) is pause, its reason saying why (Failed set).
type MonitorReviewedData struct {
	// Trigger is every_steps or before.
	Trigger string `json:"trigger"`
	Step    int    `json:"step"`
	// CallID and Tool name the call a before review is about.
	CallID string `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Verdict is ok, warn or pause; Reasons are the monitor's, in its words.
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons,omitempty"`
	// Failed says the monitor gave no usable verdict (the pause is the
	// engine's, failing closed).
	Failed bool `json:"failed,omitempty"`
	// Prompt is the trajectory summary the monitor read, redacted of every
	// vault value, so a person can audit the monitor too.
	Prompt     string  `json:"prompt"`
	Provider   string  `json:"provider"`
	Model      string  `json:"model,omitempty"`
	Usage      Usage   `json:"usage"`
	CostUSD    float64 `json:"cost_usd"`
	DurationMS int64   `json:"duration_ms"`
}

// ModelCalled reports whether the monitor's model answered for this review
// (its usage is then the call's, and counted): a review that failed closed
// before any answer (a model error after retries, a budget spent) made no
// call of its own.
func (d *MonitorReviewedData) ModelCalled() bool { return d.Usage.ModelCalls > 0 }
