package client

import (
	"iter"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Pages yields every item of a paged list: it calls page with cursor (""
// for the first page), then with each page's NextCursor, until a page has
// none. The error is non-nil only once, as the last value; breaking out of
// the loop stops reading pages. The All* methods are built on it, and it
// serves any list the same way (the in-process Runtime of the root package
// uses it too).
func Pages[T any](cursor string, page func(cursor string) (*lt.List[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			l, err := page(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range l.Data {
				if !yield(item, nil) {
					return
				}
			}
			// An empty page with a cursor would loop forever on a server
			// that misbehaves; the API never sends one.
			if l.NextCursor == nil || len(l.Data) == 0 {
				return
			}
			cursor = *l.NextCursor
		}
	}
}
