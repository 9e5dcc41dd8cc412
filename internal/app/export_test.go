package app

// SetTailKeep bounds the sessions' tails of t to keepEvents events, so a
// test outgrows them in a few turns; call it before t's first stream.
func SetTailKeep(t *Trees, keepEvents int) { t.feeds.keepEvents = keepEvents }
