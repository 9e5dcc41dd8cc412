package longhaultype

// Reasoning is a model's reasoning ("thinking") for one response, as its
// provider returned it: it is journaled with model.responded and sent back to
// the same provider on later calls where the provider needs it. Text is
// readable (a summary or the thinking itself); the other fields are opaque
// values the provider needs to accept the reasoning back.
type Reasoning struct {
	// Provider names who produced it: reasoning is only sent back to the
	// provider that made it.
	Provider string `json:"provider"`
	Text     string `json:"text,omitempty"`
	// Signature is Anthropic's signature of a thinking block.
	Signature string `json:"signature,omitempty"`
	// Redacted holds Anthropic redacted_thinking data blocks.
	Redacted []string `json:"redacted,omitempty"`
	// ID and Encrypted are an OpenAI reasoning item's id and encrypted
	// content.
	ID        string `json:"id,omitempty"`
	Encrypted string `json:"encrypted,omitempty"`
}

// AcceptanceVerdict is the result of checking a turn's final answer against
// the session's acceptance criteria (a journaled model call).
type AcceptanceVerdict struct {
	// Attempt counts verifications of this turn, from 1.
	Attempt  int                `json:"attempt"`
	AllMet   bool               `json:"all_met"`
	Criteria []CriterionVerdict `json:"criteria"`
	// Error says why the verdict could not be read, when it could not.
	Error string `json:"error,omitempty"`
}

// CriterionVerdict is the verdict on one acceptance criterion.
type CriterionVerdict struct {
	Criterion string `json:"criterion"`
	Met       bool   `json:"met"`
	Reason    string `json:"reason,omitempty"`
}
