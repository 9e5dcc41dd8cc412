package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// counted are the event types the counters read; the others pass by
// without being decoded.
var counted = map[string]bool{
	lt.EventModelRequested:     true,
	lt.EventModelResponded:     true,
	lt.EventModelFailed:        true,
	lt.EventContextCompacted:   true,
	lt.EventAcceptanceVerified: true,
	lt.EventToolCompleted:      true,
	lt.EventToolFailed:         true,
	lt.EventMonitorFinding:     true,
	lt.EventMonitorReviewed:    true,
}

// maxDetectors bounds the detector label: six detectors today.
const maxDetectors = 16

// observe counts committed events of one session. A payload moved to a
// blob is read from the blobs written with it (or, should the blob have
// been stored before, from the store); an event that cannot be read is
// skipped, since a metric must never fail a write.
func (m *Metrics) observe(ctx context.Context, st store.Store, evs []store.Event, blobs []store.BlobWrite) {
	for _, ev := range evs {
		if !counted[ev.Type] {
			continue
		}
		data, ok := m.payload(ctx, st, ev, blobs)
		if !ok {
			continue
		}
		if err := m.count(ev, data); err != nil {
			m.log.Debug("metrics: skip an event that does not decode", "session_id", ev.SessionID, "seq", ev.Seq, "type", ev.Type, "err", err)
		}
	}
}

// payload returns the event's data, reading a payload that was moved to a
// blob.
func (m *Metrics) payload(ctx context.Context, st store.Store, ev store.Event, blobs []store.BlobWrite) ([]byte, bool) {
	if !bytes.HasPrefix(ev.Data, []byte(`{"blob":`)) {
		return ev.Data, true
	}
	var stub lt.BlobData
	if json.Unmarshal(ev.Data, &stub) != nil || len(stub.Blob.SHA256) != 64 {
		return ev.Data, true
	}
	for _, b := range blobs {
		if b.SHA256 == stub.Blob.SHA256 {
			return b.Data, true
		}
	}
	data, err := st.BlobGet(ctx, stub.Blob.SHA256)
	if err != nil {
		m.log.Debug("metrics: read the payload of an event", "session_id", ev.SessionID, "seq", ev.Seq, "err", err)
		return nil, false
	}
	return data, true
}

func decode[T any](data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

// count adds one event to the counters.
func (m *Metrics) count(ev store.Event, data []byte) error {
	switch ev.Type {
	case lt.EventModelRequested:
		d, err := decode[lt.ModelRequestedData](data)
		if err != nil {
			return err
		}
		m.calls.start(ev.SessionID, modelRef{provider: d.Provider, model: d.Model})
	case lt.EventModelResponded:
		d, err := decode[lt.ModelRespondedData](data)
		if err != nil {
			return err
		}
		ref := m.endCall(ev.SessionID, d.Model)
		m.steps.Inc()
		m.modelCall(ref, "ok", d.DurationMS, d.Usage, d.CostUSD)
	case lt.EventContextCompacted:
		d, err := decode[lt.ContextCompactedData](data)
		if err != nil {
			return err
		}
		m.modelCall(m.endCall(ev.SessionID, ""), "ok", d.DurationMS, d.Usage, d.CostUSD)
	case lt.EventAcceptanceVerified:
		d, err := decode[lt.AcceptanceVerifiedData](data)
		if err != nil {
			return err
		}
		m.modelCall(m.endCall(ev.SessionID, ""), "ok", d.DurationMS, d.Usage, d.CostUSD)
	case lt.EventModelFailed:
		d, err := decode[lt.ModelFailedData](data)
		if err != nil {
			return err
		}
		ref := m.endCall(ev.SessionID, "")
		m.modelCall(ref, "error", d.DurationMS, lt.Usage{}, 0)
		if d.Retry {
			m.retries.WithLabelValues("model", ref.model).Inc()
		}
	case lt.EventToolCompleted:
		d, err := decode[lt.ToolCompletedData](data)
		if err != nil {
			return err
		}
		if d.Resolution == "" { // else a person said how it went: it did not run here
			m.toolDuration.WithLabelValues(m.tools.value(d.Tool), "ok").Observe(seconds(d.DurationMS))
		}
	case lt.EventMonitorFinding:
		d, err := decode[lt.MonitorFindingData](data)
		if err != nil {
			return err
		}
		m.findings.WithLabelValues(m.detectors.value(d.Detector)).Inc()
	case lt.EventMonitorReviewed:
		d, err := decode[lt.MonitorReviewedData](data)
		if err != nil {
			return err
		}
		if d.ModelCalled() {
			// The monitor's call ends here, as a compaction's does at
			// context.compacted.
			m.modelCall(m.endCall(ev.SessionID, d.Model), "ok", d.DurationMS, d.Usage, d.CostUSD)
		}
		switch d.Verdict {
		case lt.VerdictOK, lt.VerdictWarn, lt.VerdictPause:
			m.reviews.WithLabelValues(d.Verdict).Inc()
		}
	case lt.EventToolFailed:
		d, err := decode[lt.ToolFailedData](data)
		if err != nil {
			return err
		}
		if d.Refused != "" || d.Resolution != "" {
			return nil // it never ran
		}
		tool := m.tools.value(d.Tool)
		m.toolDuration.WithLabelValues(tool, "error").Observe(seconds(d.DurationMS))
		if d.Retry {
			m.retries.WithLabelValues("tool", tool).Inc()
		}
	}
	return nil
}

// endCall returns the bounded labels of the session's model call in
// flight, which ends: the response's own model name stands in when the
// request was not seen.
func (m *Metrics) endCall(sessionID, model string) modelRef {
	ref, ok := m.calls.end(sessionID)
	if !ok {
		ref.model = model
	}
	return modelRef{provider: m.models.value(ref.provider), model: m.models.value(ref.model)}
}

// modelCall counts one model call's latency, tokens and cost.
func (m *Metrics) modelCall(ref modelRef, outcome string, durationMS int64, u lt.Usage, cost float64) {
	m.modelDuration.WithLabelValues(ref.provider, ref.model, outcome).Observe(seconds(durationMS))
	for _, t := range []struct {
		kind string
		n    int64
	}{
		{"input", u.InputTokens}, {"cached_input", u.CachedInputTokens},
		{"output", u.OutputTokens}, {"reasoning", u.ReasoningTokens},
	} {
		if t.n > 0 {
			m.tokens.WithLabelValues(t.kind, ref.provider, ref.model).Add(float64(t.n))
		}
	}
	if cost > 0 {
		m.cost.WithLabelValues(ref.provider, ref.model).Add(cost)
	}
}

func seconds(ms int64) float64 {
	return (time.Duration(max(ms, 0)) * time.Millisecond).Seconds()
}
