// Package httpretry reads how long an HTTP server asked its client to wait
// before trying again (Retry-After, and the retry-after-ms that model APIs
// send), for the model providers, the http_request tool and the webhook
// dispatcher. It imports only the standard library. Who may import it:
// internal/model/anthropic, internal/model/openai, internal/tool,
// internal/webhook and tests.
package httpretry
