package openapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// mirrored are the wire types whose schema (of the same name) must list
// exactly their JSON fields: a field added to longhaultype without the
// document fails here, before any answer carries it unchecked.
var mirrored = []any{
	lt.Session{}, lt.Turn{}, lt.Action{}, lt.Effect{}, lt.Event{}, lt.Artifact{}, lt.Checkpoint{},
	lt.Signal{}, lt.Agent{}, lt.AgentSpec{}, lt.ModelSpec{}, lt.ToolSpec{}, lt.Policy{}, lt.Environment{},
	lt.NetworkSpec{}, lt.Budget{}, lt.BudgetPatch{}, lt.Usage{}, lt.Review{}, lt.ForkRef{}, lt.Actor{},
	lt.Approvers{}, lt.BudgetLimit{}, lt.AcceptanceVerdict{}, lt.CriterionVerdict{}, lt.APIKey{},
	lt.Identity{}, lt.Secret{}, lt.SecretInjection{}, lt.WebhookEndpoint{}, lt.WebhookDelivery{},
	lt.WebhookDeliveryAttempt{}, lt.FileListing{}, lt.FileEntry{}, lt.WorkspaceChange{}, lt.AuditEntry{},
	lt.Trace{}, lt.Span{}, lt.SpanAttributes{}, lt.TaskReport{}, lt.TaskRecord{}, lt.TaskTotals{},
	lt.TaskBucket{}, lt.TaskCheckpoint{}, lt.ActorCount{}, lt.Error{}, lt.ErrorResponse{},
	lt.CreateSessionRequest{}, lt.CreateTurnRequest{}, lt.CancelRequest{}, lt.SignalRequest{},
	lt.ForkRequest{}, lt.ReviewRequest{}, lt.AddConstraintRequest{}, lt.SteerRequest{}, lt.PauseRequest{},
	lt.Decision{}, lt.PutAgentRequest{}, lt.CreateKeyRequest{}, lt.PutSecretRequest{},
	lt.CreateWebhookEndpointRequest{}, lt.BuildInfo{}, lt.Runner{},
}

// notRequired are fields always sent that the document still leaves out
// of "required", each with its reason.
var notRequired = map[string]string{
	"Span.children": "a required recursive field is refused by validators (libopenapi: infinite circular reference)",
}

// jsonFields returns t's JSON field names (embedded structs flattened) and
// those always encoded (no omitempty).
func jsonFields(t reflect.Type) (all, always []string) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			a, w := jsonFields(ft)
			all, always = append(all, a...), append(always, w...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			always = append(always, name)
		}
	}
	return all, always
}

func TestSchemasMirrorLonghaultype(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(JSON(), &doc))
	for _, v := range mirrored {
		typ := reflect.TypeOf(v)
		name := typ.Name()
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("components.schemas has no %s (longhaultype.%s)", name, name)
			continue
		}
		all, always := jsonFields(typ)
		var props []string
		for p := range s.Properties {
			props = append(props, p)
		}
		slices.Sort(all)
		slices.Sort(props)
		if !slices.Equal(all, props) {
			t.Errorf("schema %s lists properties %v; longhaultype.%s has %v", name, props, name, all)
		}
		for _, f := range always {
			if _, ok := notRequired[name+"."+f]; ok {
				continue
			}
			if !slices.Contains(s.Required, f) {
				t.Errorf("schema %s: %s is always sent (no omitempty in longhaultype.%s): list it under required", name, f, name)
			}
		}
		for _, f := range s.Required {
			if !slices.Contains(always, f) {
				t.Errorf("schema %s requires %s, which longhaultype.%s omits when empty", name, f, name)
			}
		}
	}
}
