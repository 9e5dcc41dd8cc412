package tool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// CanonicalJSON returns the canonical encoding of the JSON document v (see
// longhaultype.CanonicalJSON, which the Go client shares): object keys
// sorted, no insignificant whitespace, numbers exactly as written; a
// duplicate key, empty input and trailing data are refused.
func CanonicalJSON(v json.RawMessage) ([]byte, error) { return lt.CanonicalJSON(v) }

// ArgumentsSHA256 is the lowercase hex SHA-256 of the canonical JSON of args.
// Approvals and the effect ledger bind to it (DESIGN.md principle 4).
func ArgumentsSHA256(args json.RawMessage) (string, error) {
	c, err := CanonicalJSON(args)
	if err != nil {
		return "", err
	}
	return CanonicalSHA256(c), nil
}

// CanonicalSHA256 is ArgumentsSHA256 of arguments already in canonical form
// (what CanonicalJSON returned), which it does not canonicalise again.
func CanonicalSHA256(canon []byte) string {
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}
