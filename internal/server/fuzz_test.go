package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
)

// checkDecoder is the property every request decoder keeps, whatever the
// bytes: it never panics; it fails only with a 400 that says something; and
// what it accepts re-encodes to a body it accepts again, to the same
// encoding (decode is a fixed point after one round).
func checkDecoder[T any](t *testing.T, data []byte, decode func([]byte) (*T, error)) {
	v, err := decode(data)
	if err != nil {
		require.Nil(t, v)
		var ae *apierror.Error
		require.ErrorAs(t, err, &ae)
		require.Equal(t, http.StatusBadRequest, ae.Status, "error %v", err)
		require.NotEmpty(t, ae.Message)
		return
	}
	require.NotNil(t, v)
	first, err := json.Marshal(v)
	require.NoError(t, err)
	again, err := decode(first)
	require.NoError(t, err, "re-decoding %s", first)
	second, err := json.Marshal(again)
	require.NoError(t, err)
	require.Equal(t, string(first), string(second))
}

// The seeds below are also committed under testdata/fuzz/<Name>/, with
// malformed ones that are awkward to write as Go literals.

func FuzzDecodeCreateSession(f *testing.F) {
	f.Add([]byte(`{"agent":"researcher","input":"Write a competitor brief for ACME"}`))
	f.Add([]byte(`{"agent_spec":{"model":{"provider":"scripted","script":[{"text":"done"}]}},"input":"go","budget":{"max_cost_usd":5}}`))
	f.Add([]byte(`{"agent_spec":{"tools":[{"name":"shell"},{"nme":"x"}]}}`))
	f.Add([]byte(`{"input":5}`))
	f.Add([]byte(`{"input":"x"} trailing`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoder(t, data, decodeCreateSession)
	})
}

func FuzzDecodeDecision(f *testing.F) {
	f.Add([]byte(`{"decision":"approve"}`))
	f.Add([]byte(`{"decision":"approve","arguments":{"to":"ceo@acme.com"}}`))
	f.Add([]byte(`{"output":{"rows":[1,2,3]}}`))
	f.Add([]byte(`{"decision":"approve","budget":{"max_cost_usd":"10"}}`))
	f.Add([]byte(`{"decision":`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoder(t, data, decodeDecision)
	})
}

func FuzzDecodeAgent(f *testing.F) {
	f.Add([]byte(`{"name":"researcher","spec":{"model":{"provider":"scripted"},"instructions":"Be brief."}}`))
	f.Add([]byte(`{"name":"r","spec":{"model":{"provider":"openai","name":"gpt","temperature":0.2},"tools":[{"name":"http_request","effect":"idempotent"}]}}`))
	f.Add([]byte(`{"name":"r","spec":{"model":{"provider":"x","pricing":{"input_per_mtok":1}},"max_steps":"ten"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoder(t, data, decodeAgent)
	})
}

func FuzzDecodeBudgetPatch(f *testing.F) {
	f.Add([]byte(`{"max_cost_usd":10,"soft_cost_usd":5}`))
	f.Add([]byte(`{"max_tokens":0,"soft_wall_seconds":3600}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"max_cost":10}`))
	f.Add([]byte(`{"max_tokens":1.5}`))
	f.Add([]byte(`{"max_tool_calls":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoder(t, data, decodeBudgetPatch)
	})
}
