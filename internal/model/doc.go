// Package model defines the interface between the turn loop and a model
// provider: a request carrying the context and the tools, a complete response
// carrying text, tool calls and usage, and classified errors that the retry
// policy understands.
//
// Providers live in sub-packages named for what they wrap: model/scripted (the
// deterministic offline provider), model/openai (OpenAI's Responses and Chat
// Completions APIs, and any OpenAI-compatible server), model/anthropic (the
// Messages API). This package imports only the standard library and
// longhaultype (and the tokenizer in tokens.go).
//
// Who may import it: internal/bench, internal/engine, internal/model/anthropic,
// internal/model/openai, internal/model/scripted, internal/node and tests.
package model
