package server

import (
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Backend is what the HTTP API serves: the application service, every use
// case of the API (internal/app implements it once, for this transport and
// the Go library alike). A handler only decodes the request, calls one
// method and encodes the answer. Errors that a client caused are
// *apierror.Error values (anything else is a 500).
type Backend = app.Service

// ListSessionsParams filters GET /v1/sessions.
type ListSessionsParams = lt.ListSessionsParams
