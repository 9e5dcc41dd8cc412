package longhaultype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// eventPayloads is the one list of the journal's event types, each with its
// payload type: EventTypes, NewEventData and Event.DecodeData read it, and
// the tests hold the engine's projection and every Event* constant to it. A
// new event type is added here, or it fails those tests.
var eventPayloads = []struct {
	typ  string
	data func() any
}{
	{EventSessionCreated, newData[SessionCreatedData]},
	{EventSessionStatusChanged, newData[SessionStatusChangedData]},
	{EventSessionCancelRequested, newData[SessionCancelRequestedData]},
	{EventSessionPauseRequested, newData[SessionPauseRequestedData]},
	{EventSessionPaused, newData[SessionPausedData]},
	{EventSessionResumed, newData[SessionResumedData]},
	{EventSessionForked, newData[SessionForkedData]},
	{EventSessionReviewed, newData[SessionReviewedData]},
	{EventConstraintAdded, newData[ConstraintAddedData]},
	{EventTurnCreated, newData[TurnCreatedData]},
	{EventTurnStarted, newData[TurnStartedData]},
	{EventTurnSteered, newData[TurnSteeredData]},
	{EventTurnCompleted, newData[TurnCompletedData]},
	{EventTurnFailed, newData[TurnFailedData]},
	{EventTurnCancelled, newData[TurnCancelledData]},
	{EventModelRequested, newData[ModelRequestedData]},
	{EventModelDelta, newData[ModelDeltaData]},
	{EventModelResponded, newData[ModelRespondedData]},
	{EventModelFailed, newData[ModelFailedData]},
	{EventContextCompacted, newData[ContextCompactedData]},
	{EventAcceptanceVerified, newData[AcceptanceVerifiedData]},
	{EventToolRequested, newData[ToolRequestedData]},
	{EventPolicyDecided, newData[PolicyDecidedData]},
	{EventToolStarted, newData[ToolStartedData]},
	{EventToolCompleted, newData[ToolCompletedData]},
	{EventToolFailed, newData[ToolFailedData]},
	{EventEffectInDoubt, newData[EffectInDoubtData]},
	{EventNetworkConnection, newData[NetworkConnectionData]},
	{EventActionRequired, newData[ActionRequiredData]},
	{EventActionResolved, newData[ActionResolvedData]},
	{EventBudgetUpdated, newData[BudgetUpdatedData]},
	{EventBudgetWarning, newData[BudgetWarningData]},
	{EventBudgetExceeded, newData[BudgetExceededData]},
	{EventCheckpointCreated, newData[CheckpointCreatedData]},
	{EventArtifactCreated, newData[ArtifactCreatedData]},
	{EventEnvironmentLost, newData[EnvironmentLostData]},
	{EventEnvironmentRestored, newData[EnvironmentRestoredData]},
	{EventEnvironmentOpened, newData[EnvironmentOpenedData]},
	{EventEnvironmentStopped, newData[EnvironmentStoppedData]},
	{EventEnvironmentStopping, newData[EnvironmentStoppingData]},
	{EventEnvironmentStopFailed, newData[EnvironmentStopFailedData]},
	{EventEnvironmentProvisioned, newData[EnvironmentProvisionedData]},
	{EventWorkspaceChanged, newData[WorkspaceChange]},
	{EventWorkspaceChangeNotApplied, newData[WorkspaceChangeNotAppliedData]},
	{EventWaitStarted, newData[WaitStartedData]},
	{EventSignalReceived, newData[SignalReceivedData]},
	{EventSubagentSpawned, newData[SubagentSpawnedData]},
	{EventSubagentCompleted, newData[SubagentCompletedData]},
	{EventSubagentReported, newData[SubagentReportedData]},
	{EventSubagentCancelRequested, newData[SubagentCancelRequestedData]},
	{EventMCPToolsListed, newData[MCPToolsListedData]},
	{EventMCPServerLost, newData[MCPServerLostData]},
	{EventMonitorFinding, newData[MonitorFindingData]},
	{EventMonitorReviewed, newData[MonitorReviewedData]},
	{EventMonitorHeld, newData[MonitorHeldData]},
}

func newData[T any]() any { return new(T) }

// eventPayloadIndex finds a type's entry in eventPayloads.
var eventPayloadIndex = func() map[string]int {
	m := make(map[string]int, len(eventPayloads))
	for i, p := range eventPayloads {
		m[p.typ] = i
	}
	return m
}()

// EventTypes returns every event type the journal may hold, grouped as in
// eventdata.go. The slice is the caller's to change.
func EventTypes() []string {
	out := make([]string, len(eventPayloads))
	for i, p := range eventPayloads {
		out[i] = p.typ
	}
	return out
}

// NewEventData returns a pointer to a zero value of the payload type of
// eventType (*SessionCreatedData for session.created, …), ready to be
// unmarshalled into; false for a type this version does not know.
func NewEventData(eventType string) (any, bool) {
	i, ok := eventPayloadIndex[eventType]
	if !ok {
		return nil, false
	}
	return eventPayloads[i].data(), true
}

// ErrUnknownEventType is returned by Event.DecodeData for an event type this
// version does not know (a newer server's): skip the event, or read its
// Data as JSON.
var ErrUnknownEventType = errors.New("unknown event type")

// DecodeData decodes the event's payload into its type: a pointer, as
// NewEventData returns, to be matched with a type switch. A payload the
// server moved to a blob (over 64 KiB) decodes as *BlobData: read the blob
// (GET /v1/blobs/{sha256}), set Data to its bytes and decode again.
func (e Event) DecodeData() (any, error) {
	v, ok := NewEventData(e.Type)
	if !ok {
		return nil, fmt.Errorf("decode data of event %d: %w %q", e.Seq, ErrUnknownEventType, e.Type)
	}
	if bytes.HasPrefix(e.Data, []byte(`{"blob":`)) {
		v = new(BlobData)
	}
	if len(e.Data) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return nil, fmt.Errorf("decode data of event %d (%s): %w", e.Seq, e.Type, err)
	}
	return v, nil
}
