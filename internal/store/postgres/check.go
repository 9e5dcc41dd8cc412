package postgres

import (
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// checks refuses bad input before it reaches the database, with the same
// rules and messages as every driver, plus what PostgreSQL's text and jsonb
// cannot store (NUL bytes, invalid UTF-8).
var checks = storeutil.Checks{StrictText: true, DocKinds: docTables}
