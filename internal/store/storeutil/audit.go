package storeutil

import (
	"encoding/json"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// AuditAppend checks an entry before it is appended and returns the
// stored form of its targets (AuditTargets).
func (c Checks) AuditAppend(row *store.AuditRow) (string, error) {
	if err := c.AuditRow(row); err != nil {
		return "", err
	}
	return AuditTargets(row.Targets)
}

// AuditTargets is the stored form of an audit entry's targets: a JSON
// object, {} for none.
func AuditTargets(t map[string]string) (string, error) {
	if t == nil {
		t = map[string]string{}
	}
	b, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("targets: %w", err)
	}
	return string(b), nil
}

// ParseAuditTargets reads what AuditTargets stored; nil for {}, so an
// entry reads back as it was appended.
func ParseAuditTargets(doc []byte) (map[string]string, error) {
	var t map[string]string
	if err := json.Unmarshal(doc, &t); err != nil {
		return nil, fmt.Errorf("targets: %w", err)
	}
	if len(t) == 0 {
		return nil, nil
	}
	return t, nil
}
