package export

import (
	"regexp"
	"strconv"
)

// What ids an import accepts. An export file may be crafted: its ids end up
// as keys in the target store, and other code may take a session id for a
// path segment (a workspace's directory, a URL). Session ids are what the
// engine makes ("ses_" and lowercase letters and digits: a ULID or a
// derived hash), or stores written by tests and tools allow ('_', '-');
// other records' ids are a type prefix and the same kind of characters:
// never a separator, a dot or a control character.
var (
	sessionIDPattern = regexp.MustCompile(`^ses_[0-9a-z_-]{1,64}$`)
	docIDPattern     = regexp.MustCompile(`^[a-z]{1,16}_[0-9A-Za-z_-]{1,128}$`)
)

// checkSessionID refuses an id the engine would never have made, naming
// the field that holds it.
func checkSessionID(at, field, id string) error {
	if !sessionIDPattern.MatchString(id) {
		return invalid("%s: %s %s is not a session id (ses_ and up to 64 lowercase letters, digits, '_' or '-')", at, field, quoteID(id))
	}
	return nil
}

func checkDocID(at, field, id string) error {
	if !docIDPattern.MatchString(id) {
		return invalid("%s: %s %s is not a record id (a type prefix, '_', then letters, digits, '_' or '-')", at, field, quoteID(id))
	}
	return nil
}

// quoteID quotes an id for a message, cut short: a crafted one may be
// huge or hold control characters.
func quoteID(id string) string {
	const maxLen = 80
	if len(id) > maxLen {
		id = id[:maxLen] + "..."
	}
	return strconv.Quote(id)
}
