package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// diskPoll is how often the workspace of a running command is measured.
const diskPoll = 500 * time.Millisecond

// diskWalkEvery: every diskWalkEvery-th measure of a running command's
// workspace walks it whole (about every 5 s) instead of trusting the usage
// tracker's events, so that a write the kernel's inotify does not report
// (usagetrack_linux.go) is caught within that bound.
const diskWalkEvery = 10

// pollMeasurer is the measurer of a command's poll-th measure (from 0):
// walkWorkspace every diskWalkEvery-th, measure otherwise.
func pollMeasurer(measure measurer, poll int) measurer {
	if poll%diskWalkEvery == diskWalkEvery-1 {
		return walkWorkspace
	}
	return measure
}

// diskError is a workspace over its quota, or one that cannot be measured
// against it (cause): the quota fails closed, since a workspace made
// unmeasurable on purpose (directories nested past the walk's depth,
// directories nobody may read) would otherwise take writes without bound.
type diskError struct {
	used, limit int64
	cause       error
}

func (e *diskError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("the workspace cannot be measured against its disk quota of %s (environment.disk_mb): %v; remove what cannot be measured before writing more",
			mib(e.limit), e.cause)
	}
	return fmt.Sprintf("the workspace uses %s, over its disk quota of %s (environment.disk_mb): remove files before writing more",
		mib(e.used), mib(e.limit))
}

// Is makes a workspace that cannot be measured tool.ErrUnmeasurable: a
// caller tells it apart from one over its quota.
func (e *diskError) Is(target error) bool { return e.cause != nil && target == tool.ErrUnmeasurable }

// usageBefore measures the workspace before a command (giving what it
// finds to owner, when set). A workspace that cannot be measured is not a
// set-up failure — a command must stay able to remove what makes it so —
// and what the walk could count is a lower bound of its usage: a later
// measure above it counts as growth, so the quota binds, while a command
// that removes the unmeasurable part and then the rest is not stopped
// halfway for what was there before it ran. (While the workspace cannot
// be measured, the command is stopped at once: overQuota.)
func usageBefore(ws string, owner *ids) int64 { return usageBeforeBy(measureWorkspace, ws, owner) }

func usageBeforeBy(measure measurer, ws string, owner *ids) int64 {
	used, _ := measure(ws, owner)
	return used
}

// measurer measures a workspace's usage (and gives owner, when set, what it
// does not own), as scanWorkspace does: measureWorkspace, from the usage
// tracker's record when the kernel's events vouch for it, for sandboxes,
// whose commands write only through the workspace's own mount; or
// walkWorkspace, which always walks (keeping the record), for the local
// backend, whose commands are not confined: one could give a workspace
// file a second name outside it, which no event reports, and write through
// it (usagetrack_linux.go).
type measurer func(ws string, owner *ids) (int64, error)

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// overQuota measures the workspace ws; it returns a *diskError when it is
// over limit and larger than before (what the command found: a command may
// always free space, and one that adds nothing to a workspace already over
// its quota is not failed for it) or cannot be measured, and nil when it
// is within its quota.
func overQuota(ws string, limit, before int64) error {
	return overQuotaBy(measureWorkspace, ws, nil, limit, before)
}

// overQuotaBy is overQuota measuring with measure, giving owner (when set)
// what it does not own, as every measure of a root server's workspace does.
func overQuotaBy(measure measurer, ws string, owner *ids, limit, before int64) error {
	used, err := measure(ws, owner)
	if err != nil {
		return &diskError{limit: limit, cause: err}
	}
	if used > limit && used > before {
		return &diskError{used: used, limit: limit}
	}
	return nil
}

// diskMonitor returns a runSpec.monitor that measures the workspace while
// the command runs and stops it once the workspace is over its quota. It
// measures every diskPoll, or, for a workspace so large that measuring it
// takes long, after four times what the last measurement took (so that the
// measuring never takes more than a fifth of a core). The quota therefore
// holds to within what a command writes between two measurements, not to
// the byte. Every diskWalkEvery-th measurement walks the workspace
// (pollMeasurer); the wait after it follows what the walk took, so the
// walks keep within the same fifth of a core.
func diskMonitor(measure measurer, ws string, owner *ids, limit, before int64) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		wait := diskPoll
		for poll := 0; ; poll++ {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			start := time.Now()
			var de *diskError
			if err := overQuotaBy(pollMeasurer(measure, poll), ws, owner, limit, before); errors.As(err, &de) {
				return de
			}
			wait = max(diskPoll, 4*time.Since(start))
		}
	}
}

// applyQuota marks res when the run was stopped for the quota, or when the
// workspace is over it now that the command ended: the call then fails
// with a tool error that says so (Limit stays what stopped the command
// when that was another limit, as the file size of a single large write).
func applyQuota(measure measurer, res *tool.ExecResult, out *runOutcome, ws string, owner *ids, limit, before int64) {
	var de *diskError
	if !errors.As(out.stopErr, &de) {
		if err := overQuotaBy(measure, ws, owner, limit, before); !errors.As(err, &de) {
			return
		}
	}
	if res.Limit == "" {
		res.Limit = LimitDisk
	}
	res.Error = de.Error()
}

// checkWrite reports, as a *diskError, whether writing size more bytes
// into the workspace ws would take it over limit (tool.DiskQuota). The file
// is counted whole, even when it replaces one: the measure errs on the
// side of the quota. It measures from the usage tracker's record with
// either backend: the local backend walks around each command (its
// measurer), so what a command did is in the record when it ends. owner,
// when set, is given what it does not own, as before a command.
func checkWrite(ws string, owner *ids, limit, size int64) error {
	used, err := measureWorkspace(ws, owner)
	if err != nil {
		return &diskError{limit: limit, cause: err}
	}
	if used+max(size, minEntryBytes) > limit {
		return &writeError{diskError{used: used, limit: limit}, size}
	}
	return nil
}

// writeError is a write refused by the workspace quota.
type writeError struct {
	diskError
	size int64
}

func (e *writeError) Error() string {
	return fmt.Sprintf("writing %s would take the workspace (%s used) over its disk quota of %s (environment.disk_mb): remove files first",
		mib(e.size), mib(e.used), mib(e.limit))
}

// CheckWrite implements tool.DiskQuota.
func (e *bwrapExec) CheckWrite(size int64) error {
	lim, err := e.spec.validate(e.b.disk)
	if err != nil {
		return err
	}
	return checkWrite(e.spec.Workspace, e.b.sandboxOwner(), lim.DiskBytes, size)
}

// CheckWrite implements tool.DiskQuota.
func (e *localExec) CheckWrite(size int64) error {
	lim, err := e.spec.validate(e.disk)
	if err != nil {
		return err
	}
	return checkWrite(e.spec.Workspace, nil, lim.DiskBytes, size)
}

var (
	_ tool.DiskQuota = (*bwrapExec)(nil)
	_ tool.DiskQuota = (*localExec)(nil)
)

// MinEntryBytes is what each entry counts for at least in a workspace's
// usage (minEntryBytes), for those that estimate the usage of a workspace
// they cannot measure, from a snapshot of it.
const MinEntryBytes = minEntryBytes
