package postgres

import (
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// checks refuses bad input before it reaches the database, with the same
// rules and messages as every driver, plus what PostgreSQL's text and jsonb
// cannot store (NUL bytes, invalid UTF-8).
var checks = storeutil.Checks{StrictText: true, DocKinds: docTables}

// appendChecks are EventAppend's: the same, but a document's JSON is left
// to the server, which parses every one the append stores (the state a json
// parameter, the events' and docs' data cast to json) and refuses the whole
// statement if one is not JSON: the append's documents are the bulk of its
// bytes, and parsing them here too cost about a tenth of the node's CPU at
// 64 sessions. An append that these refuse (prepareAppend) or that fails
// once sent (EventAppend) is checked again with checks, so bad input is
// refused as before: its first bad field named, before any conflict.
var appendChecks = storeutil.Checks{StrictText: true, DocKinds: docTables, JSONInDatabase: true}
