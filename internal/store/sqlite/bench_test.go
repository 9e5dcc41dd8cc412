package sqlite

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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
	ctx := context.Background()
	var (
		remaining atomic.Int64
		failed    atomic.Pointer[error]
		wg        sync.WaitGroup
	)
	remaining.Store(int64(b.N))
	commits := s.w.commits.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("ses_%d", i)
			last := int64(1)
			for remaining.Add(-1) >= 0 {
				if _, err := s.EventAppend(ctx, appendParams(id, last, 2)); err != nil {
					failed.Store(&err)
					return
				}
				last += 2
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	reportCommits(b, s, commits)
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
