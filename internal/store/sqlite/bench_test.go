package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// BenchmarkAppendSerial: one session, one caller, 2-event appends. Each
// append waits for its own commit, so this measures the latency floor (one
// fsync per append).
func BenchmarkAppendSerial(b *testing.B) {
	s := openMigrated(b, nil)
	createSession(b, s, "ses_bench", false)
	ctx := context.Background()
	last := int64(1)
	commits := s.w.commits.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.EventAppend(ctx, appendParams("ses_bench", last, 2)); err != nil {
			b.Fatal(err)
		}
		last += 2
	}
	b.StopTimer()
	reportCommits(b, s, commits)
}

// BenchmarkAppendConcurrent64: 64 sessions, each appended to serially by its
// own goroutine; group commit lets many appends share one fsync.
func BenchmarkAppendConcurrent64(b *testing.B) {
	const sessions = 64
	s := openMigrated(b, nil)
	for i := range sessions {
		createSession(b, s, fmt.Sprintf("ses_%d", i), false)
	}
	commits := s.w.commits.Load()
	appendFromEach(b, s, sessions, func(id string, last int64, _ int) *store.EventAppendParams {
		return appendParams(id, last, 2)
	})
	reportCommits(b, s, commits)
}

// appendFromEach makes b.N appends in all, from a goroutine per session
// (ses_0 to ses_{sessions-1}, created), each appending serially what
// params gives for its step-th append after seq last.
func appendFromEach(b *testing.B, s *Store, sessions int, params func(id string, last int64, step int) *store.EventAppendParams) {
	ctx := context.Background()
	var (
		remaining atomic.Int64
		failed    atomic.Pointer[error]
		wg        sync.WaitGroup
	)
	remaining.Store(int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("ses_%d", i)
			last := int64(1)
			for step := 1; remaining.Add(-1) >= 0; step++ {
				p := params(id, last, step)
				if _, err := s.EventAppend(ctx, p); err != nil {
					failed.Store(&err)
					return
				}
				last += int64(len(p.Events))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}

// BenchmarkTreeStep: what a step of a session in a sub-agent tree costs
// the store, to compare with BenchmarkAppendSerial: its call reserved in
// the tree's ledger, then the 2-event append that settles it.
func BenchmarkTreeStep(b *testing.B) {
	s := openMigrated(b, nil)
	createSession(b, s, "ses_bench", true)
	ctx := context.Background()
	leases, err := s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "node", Now: testTime, ExpiresAt: testTime.Add(time.Hour), Limit: 1})
	if err != nil || len(leases) != 1 {
		b.Fatalf("claim: %v", err)
	}
	l := leases[0]
	l.PreviousOwner = ""
	err = s.TreeBudgetPut(ctx, &store.TreeBudgetPutParams{RootID: "ses_bench", Limits: store.TreeAmounts{CostUSD: 1e9}, Now: testTime})
	if err != nil {
		b.Fatal(err)
	}
	last := int64(1)
	commits := s.w.commits.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("res_%d", i)
		res, err := s.TreeReserve(ctx, &store.TreeReserveParams{RootID: "ses_bench", ID: id, Lease: l, Kind: store.TreeCallModel, Now: testTime})
		if err != nil || res.Outcome != store.TreeGranted {
			b.Fatalf("reserve: %v %+v", err, res)
		}
		p := appendParams("ses_bench", last, 2)
		p.Fence = &l
		p.Runnable = true
		p.TreeSettle = &store.TreeSettle{RootID: "ses_bench", Release: []string{id}, Used: store.TreeAmounts{CostUSD: 0.01, Tokens: 100, ModelCalls: 1}}
		if _, err := s.EventAppend(ctx, p); err != nil {
			b.Fatal(err)
		}
		last += 2
	}
	b.StopTimer()
	reportCommits(b, s, commits)
}

// reportCommits reports commits (fsyncs) per append and appends per second.
func reportCommits(b *testing.B, s *Store, before int64) {
	b.ReportMetric(float64(s.w.commits.Load()-before)/float64(b.N), "commits/op")
	if secs := b.Elapsed().Seconds(); secs > 0 {
		b.ReportMetric(float64(b.N)/secs, "appends/s")
	}
}

// BenchmarkAppendStepLike1000: 1,000 sessions, each appended to serially by
// its own goroutine with what an agent step appends: six events of a few
// hundred bytes, a state of 4 KiB, an effect and a checkpoint document.
// cpu-ns/op is the process's CPU per append, which a loaded machine bends
// less than the wall time.
func BenchmarkAppendStepLike1000(b *testing.B) {
	const sessions = 1000
	s := openMigrated(b, nil)
	for i := range sessions {
		createSession(b, s, fmt.Sprintf("ses_%d", i), false)
	}
	state := json.RawMessage(`{"pad":"` + strings.Repeat("s", 4<<10) + `"}`)
	data := json.RawMessage(`{"pad":"` + strings.Repeat("e", 300) + `"}`)
	params := func(id string, last int64, step int) *store.EventAppendParams {
		p := &store.EventAppendParams{SessionID: id, ExpectedSeq: last, Status: "running", State: state, UpdatedAt: testTime}
		for range 6 {
			p.Events = append(p.Events, store.NewEvent{Type: "test.event", Time: testTime, Data: data})
		}
		for _, kind := range []store.DocKind{store.DocEffect, store.DocCheckpoint} {
			p.Docs = append(p.Docs, store.DocWrite{Kind: kind, ID: fmt.Sprintf("%s_%s_%d", kind, id, step), SessionID: id,
				Status: "done", Doc: data, CreatedAt: testTime})
		}
		return p
	}
	commits, busy := s.w.commits.Load(), s.w.busy.Load()
	cpu := processCPU()
	appendFromEach(b, s, sessions, params)
	reportCommits(b, s, commits)
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(s.w.busy.Load()-busy)/float64(b.N), "writer-busy-ns/op")
}

// processCPU is the process's CPU time so far (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSSMiB is the process's peak resident set so far, in MiB (Linux
// reports it in KiB).
func peakRSSMiB() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}
