package openai

import "fmt"

// Wire fixtures in the shapes of OpenAI's API reference ("Streaming events"
// of the Responses API, "The chat completion chunk object" of Chat
// Completions): the field names, nesting and nulls a real server sends.

const responsesModel = "gpt-5-2025-08-07"

// responseObject is a Response object as response.created and
// response.completed carry it.
func responseObject(status, output, usage, incomplete string) string {
	return fmt.Sprintf(`{"id":"resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41","object":"response","created_at":1741476777,`+
		`"status":%q,"background":false,"error":null,"incomplete_details":%s,"instructions":null,"max_output_tokens":null,`+
		`"model":%q,"output":%s,"parallel_tool_calls":true,"previous_response_id":null,`+
		`"reasoning":{"effort":"medium","summary":null},"store":false,"temperature":1.0,"text":{"format":{"type":"text"}},`+
		`"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":%s,"user":null,"metadata":{}}`,
		status, incomplete, responsesModel, output, usage)
}

// usageObject is a Responses API usage object.
func usageObject(input, cached, output, reasoning int) string {
	return fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,`+
		`"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}`, input, cached, output, reasoning, input+output)
}

func created(seq int) string {
	return event(fmt.Sprintf(`{"type":"response.created","sequence_number":%d,"response":%s}`, seq, responseObject("in_progress", "[]", "null", "null")))
}

func inProgress(seq int) string {
	return event(fmt.Sprintf(`{"type":"response.in_progress","sequence_number":%d,"response":%s}`, seq, responseObject("in_progress", "[]", "null", "null")))
}

func completed(seq int, output, usage string) string {
	return event(fmt.Sprintf(`{"type":"response.completed","sequence_number":%d,"response":%s}`, seq, responseObject("completed", output, usage, "null")))
}

// Output items, as response.output_item.done and response.completed carry
// them.

func messageItem(id, text string) string {
	return fmt.Sprintf(`{"id":%q,"type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":%q,"annotations":[],"logprobs":[]}]}`, id, text)
}

func functionCallItem(id, callID, name, args string) string {
	return fmt.Sprintf(`{"id":%q,"type":"function_call","status":"completed","arguments":%q,"call_id":%q,"name":%q}`, id, args, callID, name)
}

func reasoningItem(id, summary, encrypted string) string {
	return fmt.Sprintf(`{"id":%q,"type":"reasoning","summary":[{"type":"summary_text","text":%q}],"encrypted_content":%q}`, id, summary, encrypted)
}

// The event sequence of one message item: added, content part, text deltas,
// text done, part done, item done. seq is the first sequence number; the
// next free one is returned.
func messageEvents(seq, index int, id string, parts ...string) ([]string, int) {
	text := ""
	for _, p := range parts {
		text += p
	}
	evs := []string{
		event(fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":%d,"output_index":%d,"item":{"id":%q,"type":"message","status":"in_progress","role":"assistant","content":[]}}`, seq, index, id)),
		event(fmt.Sprintf(`{"type":"response.content_part.added","sequence_number":%d,"item_id":%q,"output_index":%d,"content_index":0,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}}`, seq+1, id, index)),
	}
	seq += 2
	for _, p := range parts {
		evs = append(evs, event(fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":%q,"output_index":%d,"content_index":0,"delta":%q,"logprobs":[]}`, seq, id, index, p)))
		seq++
	}
	evs = append(evs,
		event(fmt.Sprintf(`{"type":"response.output_text.done","sequence_number":%d,"item_id":%q,"output_index":%d,"content_index":0,"text":%q,"logprobs":[]}`, seq, id, index, text)),
		event(fmt.Sprintf(`{"type":"response.content_part.done","sequence_number":%d,"item_id":%q,"output_index":%d,"content_index":0,"part":{"type":"output_text","text":%q,"annotations":[],"logprobs":[]}}`, seq+1, id, index, text)),
		event(fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":%d,"output_index":%d,"item":%s}`, seq+2, index, messageItem(id, text))),
	)
	return evs, seq + 3
}

// The event sequence of one function_call item: added (empty arguments),
// argument deltas, arguments done, item done.
func functionCallEvents(seq, index int, id, callID, name string, argParts ...string) ([]string, int) {
	args := ""
	for _, p := range argParts {
		args += p
	}
	evs := []string{
		event(fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":%d,"output_index":%d,"item":{"id":%q,"type":"function_call","status":"in_progress","arguments":"","call_id":%q,"name":%q}}`, seq, index, id, callID, name)),
	}
	seq++
	for _, p := range argParts {
		evs = append(evs, event(fmt.Sprintf(`{"type":"response.function_call_arguments.delta","sequence_number":%d,"item_id":%q,"output_index":%d,"delta":%q}`, seq, id, index, p)))
		seq++
	}
	evs = append(evs,
		event(fmt.Sprintf(`{"type":"response.function_call_arguments.done","sequence_number":%d,"item_id":%q,"output_index":%d,"name":%q,"arguments":%q}`, seq, id, index, name, args)),
		event(fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":%d,"output_index":%d,"item":%s}`, seq+1, index, functionCallItem(id, callID, name, args))),
	)
	return evs, seq + 2
}

// The event sequence of one reasoning item with a streamed summary. The
// added event carries no encrypted content yet (the API reference: it may be
// incomplete there); the done event carries it whole.
func reasoningEvents(seq, index int, id, encrypted string, summaryParts ...string) ([]string, int) {
	summary := ""
	for _, p := range summaryParts {
		summary += p
	}
	evs := []string{
		event(fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":%d,"output_index":%d,"item":{"id":%q,"type":"reasoning","summary":[],"encrypted_content":null}}`, seq, index, id)),
		event(fmt.Sprintf(`{"type":"response.reasoning_summary_part.added","sequence_number":%d,"item_id":%q,"output_index":%d,"summary_index":0,"part":{"type":"summary_text","text":""}}`, seq+1, id, index)),
	}
	seq += 2
	for _, p := range summaryParts {
		evs = append(evs, event(fmt.Sprintf(`{"type":"response.reasoning_summary_text.delta","sequence_number":%d,"item_id":%q,"output_index":%d,"summary_index":0,"delta":%q,"obfuscation":"xyz"}`, seq, id, index, p)))
		seq++
	}
	evs = append(evs,
		event(fmt.Sprintf(`{"type":"response.reasoning_summary_text.done","sequence_number":%d,"item_id":%q,"output_index":%d,"summary_index":0,"text":%q}`, seq, id, index, summary)),
		event(fmt.Sprintf(`{"type":"response.reasoning_summary_part.done","sequence_number":%d,"item_id":%q,"output_index":%d,"summary_index":0,"part":{"type":"summary_text","text":%q}}`, seq+1, id, index, summary)),
		event(fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":%d,"output_index":%d,"item":%s}`, seq+2, index, reasoningItem(id, summary, encrypted))),
	)
	return evs, seq + 3
}

// Chat Completions chunks.

const chatModel = "gpt-4o-mini-2024-07-18"

func chatChunk(choices string) string {
	return chunk(fmt.Sprintf(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,`+
		`"model":%q,"service_tier":"default","system_fingerprint":"fp_06737a9306","choices":[%s],"usage":null}`, chatModel, choices))
}

func chatRoleChunk() string {
	return chatChunk(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`)
}

func chatTextChunk(text string) string {
	return chatChunk(fmt.Sprintf(`{"index":0,"delta":{"content":%q},"logprobs":null,"finish_reason":null}`, text))
}

func chatFinishChunk(reason string) string {
	return chatChunk(fmt.Sprintf(`{"index":0,"delta":{},"logprobs":null,"finish_reason":%q}`, reason))
}

// chatToolStart opens tool call index with its id and name.
func chatToolStart(index int, id, name string) string {
	return chatChunk(fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]},"logprobs":null,"finish_reason":null}`, index, id, name))
}

// chatToolArgs streams a piece of tool call index's arguments.
func chatToolArgs(index int, args string) string {
	return chatChunk(fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%q}}]},"logprobs":null,"finish_reason":null}`, index, args))
}

// chatUsageChunk is the last chunk stream_options.include_usage asks for: no
// choices, the usage of the whole request.
func chatUsageChunk(prompt, cached, completion, reasoning int) string {
	return chunk(fmt.Sprintf(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,`+
		`"model":%q,"service_tier":"default","system_fingerprint":"fp_06737a9306","choices":[],`+
		`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,`+
		`"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},`+
		`"completion_tokens_details":{"reasoning_tokens":%d,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
		chatModel, prompt, completion, prompt+completion, cached, reasoning))
}
