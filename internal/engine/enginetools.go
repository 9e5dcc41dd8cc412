package engine

import (
	"encoding/json"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Tools the engine runs itself, because they act on the session rather than
// on the workspace: finish ends the turn with artifacts, ask_human turns into
// an input action. Policies do not apply to them (they touch nothing
// outside the session).
const (
	finishTool     = "finish"
	askHumanTool   = "ask_human"
	checkpointTool = "checkpoint"
)

type engineTool struct {
	kind        string
	description string
	schema      json.RawMessage
}

var engineTools = map[string]engineTool{
	finishTool: {
		kind:        lt.CallFinish,
		description: "Finish the task: give a summary and the workspace files to deliver as artifacts.",
		schema:      json.RawMessage(finishSchema),
	},
	checkpointTool: {
		kind:        lt.CallCheckpoint,
		description: "Mark a checkpoint: a named point of the work with a summary of what exists and what comes next. The workspace is snapshotted, so the session can be resumed or forked from here.",
		schema:      json.RawMessage(checkpointSchema),
	},
	sleepTool: {
		kind:        lt.CallWait,
		description: "Wait for a while (seconds) before going on, e.g. for a job to finish. The session holds no resources meanwhile, and the wait survives restarts.",
		schema:      json.RawMessage(sleepSchema),
	},
	waitForSignalTool: {
		kind:        lt.CallWait,
		description: "Wait until the application sends a signal of this name (its payload is the result), or until the timeout. A signal sent before you wait is kept for you.",
		schema:      json.RawMessage(waitForSignalSchema),
	},
	spawnAgentTool: {
		kind:        lt.CallSpawn,
		description: "Start a sub-agent: a separate session with its own context that works in parallel in your workspace, on a task you describe completely in input. Name a configured agent, give an inline agent_spec, or give instructions to run your own model and tools with them. It gets a share of your remaining budget, and at most your own tools, network, secrets and model: asking for more is refused. Returns its id; call wait_agents for its answer.",
		schema:      json.RawMessage(spawnAgentSchema),
	},
	waitAgentsTool: {
		kind:        lt.CallWait,
		description: "Wait until your sub-agents finish (all, or any one) and get their answers and artifacts. You hold no resources meanwhile.",
		schema:      json.RawMessage(waitAgentsSchema),
	},
	askHumanTool: {
		kind:        lt.CallHuman,
		description: "Ask a person a question and wait for the answer (optionally one of the given choices). Use it when you need information or a decision only a person has.",
		schema:      json.RawMessage(askHumanSchema),
	},
}

// engineToolNamed returns the engine's tool of that name, if it runs one.
func engineToolNamed(name string) (engineTool, bool) {
	et, ok := engineTools[name]
	return et, ok
}

const finishSchema = `{"type":"object","properties":{"summary":{"type":"string","description":"What was done, for the person who asked"},"artifacts":{"type":"array","items":{"type":"string"},"description":"Workspace paths of the files to deliver"}},"required":["summary"],"additionalProperties":false}`

const askHumanSchema = `{"type":"object","properties":{"question":{"type":"string","minLength":1,"description":"The question, complete enough to answer without other context"},"choices":{"type":"array","items":{"type":"string","minLength":1},"minItems":2,"uniqueItems":true,"description":"The answers to choose from, if the answer must be one of them"},"kind":{"type":"string","enum":["text","file"],"description":"text (default): an answer in words; file: the person uploads a file to path in the workspace"},"path":{"type":"string","minLength":1,"description":"With kind file: the workspace-relative path the file is uploaded to"}},"required":["question"],"additionalProperties":false}`

type askHumanArgs struct {
	Question string   `json:"question"`
	Choices  []string `json:"choices,omitempty"`
	Kind     string   `json:"kind,omitempty"`
	Path     string   `json:"path,omitempty"`
}
