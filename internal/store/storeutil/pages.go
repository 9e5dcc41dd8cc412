package storeutil

import "fmt"

// Page is the default and the maximum length of one of the store's lists,
// part of the interface's contract and so the same for every driver.
type Page struct {
	Default, Max int
}

// The pages of EventList, SessionList, ActionListAll and AuditList.
var (
	EventPage   = Page{Default: 100, Max: 10000}
	SessionPage = Page{Default: 50, Max: 1000}
	ActionPage  = Page{Default: 50, Max: 1000}
	// AuditPage is the page of AuditList.
	AuditPage = Page{Default: 100, Max: 1000}
)

// Limit applies the page's default to a limit of 0 and refuses a negative
// one or one over the maximum.
func (p Page) Limit(limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, fmt.Errorf("limit must not be negative, got %d", limit)
	case limit == 0:
		return p.Default, nil
	case limit > p.Max:
		return 0, fmt.Errorf("limit must be at most %d, got %d", p.Max, limit)
	}
	return limit, nil
}
