// Package apierror is the one error type that carries what an API user sees:
// the HTTP status, the API's error code, a message and the offending field.
// The internal cause is kept for the log only and never shown to users.
//
// The engine returns these for anything a client did wrong; the server maps
// them to responses. It imports only the standard library and longhaultype.
//
// Who may import it: any package.
package apierror
