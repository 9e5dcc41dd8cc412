package monitor

import (
	"fmt"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Detector names (lt.MonitorFindingData.Detector).
const (
	RefusedConnections = "refused_connections"
	SecretProbe        = "secret_probe"
	CapabilityWidening = "capability_widening"
	EscapeSignatures   = "escape_signatures"
	SecretLikeEgress   = "secret_like_egress"
	RepeatedFailure    = "repeated_failure"
)

// Severities.
const (
	Low    = "low"
	Medium = "medium"
	High   = "high"
)

// Names lists every detector, in the order they are documented.
var Names = []string{RefusedConnections, SecretProbe, CapabilityWidening, EscapeSignatures, SecretLikeEgress, RepeatedFailure}

// DefaultAction is what a detector's findings do when the agent's spec does
// not say. A finding of the detectors that fire on what ordinary work does
// now and then (a refused connection to a host the agent guessed, a
// retried command, a spawn that asked too much and was refused anyway) is
// logged; the two whose findings mean a secret may be leaving or the
// sandbox is being attacked ask a person before the next call runs.
func DefaultAction(detector string) string {
	switch detector {
	case SecretLikeEgress, EscapeSignatures:
		return lt.MonitorAsk
	}
	return lt.MonitorLog
}

// Known reports whether name is a detector.
func Known(name string) bool {
	for _, n := range Names {
		if n == name {
			return true
		}
	}
	return false
}

// Actions resolves spec to each detector's action: a detector turned off
// is absent. A spec naming an unknown detector or action is an error
// naming the field (under prefix, e.g. "monitor").
func Actions(spec *lt.MonitorSpec, prefix string) (map[string]string, error) {
	out := make(map[string]string, len(Names))
	for _, n := range Names {
		out[n] = DefaultAction(n)
	}
	if spec == nil {
		return out, nil
	}
	for name, d := range spec.Detectors {
		field := prefix + ".detectors." + name
		if !Known(name) {
			return nil, &FieldError{Field: field, Message: fmt.Sprintf("unknown detector %q (one of refused_connections, secret_probe, capability_widening, escape_signatures, secret_like_egress, repeated_failure)", name)}
		}
		switch d.Action {
		case "":
		case lt.MonitorLog, lt.MonitorAsk, lt.MonitorStop:
			out[name] = d.Action
		default:
			return nil, &FieldError{Field: field + ".action", Message: fmt.Sprintf("must be log, ask or stop, got %q", d.Action)}
		}
		if d.Off {
			delete(out, name)
		}
	}
	return out, nil
}

// FieldError is a monitor spec's invalid field.
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Finding is one detector's report, with the turn and step of the event
// that completed it (where its monitor.finding is journaled).
type Finding struct {
	lt.MonitorFindingData
	TurnID string
	Step   int
}

// last is the newest evidence seq of f.
func (f *Finding) last() int64 {
	if len(f.Evidence) == 0 {
		return 0
	}
	return f.Evidence[len(f.Evidence)-1]
}

// hit is one piece of evidence: an event and the monitor step it came at.
type hit struct {
	Seq  int64  `json:"seq"`
	Step int    `json:"step"`
	Key  string `json:"key,omitempty"`
}

// window keeps the hits of the last Steps monitor steps.
type window []hit

// add appends h and drops the hits older than steps before it.
func (w window) add(h hit, steps int) window {
	w = append(w, h)
	cut := 0
	for cut < len(w) && w[cut].Step <= h.Step-steps {
		cut++
	}
	if cut > 0 {
		w = append(w[:0], w[cut:]...)
	}
	// A bound whatever the steps: a detector's evidence list stays small.
	if len(w) > maxHits {
		w = append(w[:0], w[len(w)-maxHits:]...)
	}
	return w
}

func (w window) seqs() []int64 {
	out := make([]int64, len(w))
	for i, h := range w {
		out[i] = h.Seq
	}
	return out
}

func (w window) distinctKeys() int {
	seen := make(map[string]bool, len(w))
	for _, h := range w {
		seen[h.Key] = true
	}
	return len(seen)
}

// maxHits bounds a window's hits.
const maxHits = 64
