package postgres

import (
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// checks refuses bad input before it reaches the database, with the same
// rules and messages as every driver, plus what PostgreSQL's text and jsonb
// cannot store (NUL bytes, invalid UTF-8).
var checks = storeutil.Checks{StrictText: true, DocKinds: docTables}

// checkLimit applies a list's default and maximum.
func checkLimit(limit, def, maxLimit int) (int, error) {
	switch {
	case limit < 0:
		return 0, fmt.Errorf("limit must not be negative, got %d", limit)
	case limit == 0:
		return def, nil
	case limit > maxLimit:
		return 0, fmt.Errorf("limit must be at most %d, got %d", maxLimit, limit)
	}
	return limit, nil
}
