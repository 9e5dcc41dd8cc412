package engine

import "time"

// Clock is the engine's source of time; tests inject a fake one. Logic never
// calls time.Now or time.After directly.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now().UTC() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
