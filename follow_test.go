package longhaul

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFollowEndsWithAnError: follow never ends a stream silently. A
// service's stream that stops while ctx is live (the engine's watches
// closed: the Runtime is closing) ends it with errClosing; one that stops
// because ctx ended, with ctx's error; a failure is the last value.
func TestFollowEndsWithAnError(t *testing.T) {
	t.Parallel()
	two := func(err error) iter.Seq2[int, error] {
		return func(yield func(int, error) bool) {
			if yield(1, nil) && yield(2, nil) && err != nil {
				yield(0, err)
			}
		}
	}
	wrap := func(err error) error { return err }
	run := func(ctx context.Context, seq iter.Seq2[int, error]) (got []int, errs []error) {
		follow(ctx, seq, func(v int, err error) bool {
			if err != nil {
				errs = append(errs, err)
			} else {
				got = append(got, v)
			}
			return true
		}, wrap)
		return got, errs
	}

	got, errs := run(t.Context(), two(nil))
	require.Equal(t, []int{1, 2}, got)
	require.Equal(t, []error{errClosing}, errs)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, errs = run(ctx, two(nil))
	require.Equal(t, []error{context.Canceled}, errs)

	failed := errors.New("read failed")
	_, errs = run(t.Context(), two(failed))
	require.Equal(t, []error{failed}, errs)
}
