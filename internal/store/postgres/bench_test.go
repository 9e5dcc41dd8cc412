package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
)

// The append benchmarks mirror the SQLite driver's (internal/store/sqlite,
// bench_test.go), against the server that LONGHAUL_TEST_POSTGRES names:
//
//	go test -run '^$' -bench Append ./internal/store/postgres
//
// The figures depend on that server's durability settings (fsync,
// synchronous_commit) as much as on the driver.

// BenchmarkAppendSerial: one session, one caller, 2-event appends. Each
// append waits for its own commit: the latency floor.
func BenchmarkAppendSerial(b *testing.B) {
	s := openMigrated(b, nil)
	createSession(b, s, "ses_bench", false)
	ctx := context.Background()
	last := int64(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.EventAppend(ctx, appendParams("ses_bench", last, 2)); err != nil {
			b.Fatal(err)
		}
		last += 2
	}
	b.StopTimer()
	reportRate(b)
}

// BenchmarkAppendConcurrent64: 64 sessions, each appended to serially by its
// own goroutine, through one node's pool.
func BenchmarkAppendConcurrent64(b *testing.B) {
	benchConcurrent(b, 1)
}

// BenchmarkAppendConcurrent64ThreeNodes: the same load spread over three
// nodes (three stores, each with its own pool and listener) on one schema.
func BenchmarkAppendConcurrent64ThreeNodes(b *testing.B) {
	benchConcurrent(b, 3)
}

func benchConcurrent(b *testing.B, nodes int) {
	const sessions = 64
	dsn := pgtest.FreshSchema(b)
	stores := make([]*Store, nodes)
	for i := range stores {
		stores[i] = openDSN(b, dsn, &Config{MaxConns: 16})
	}
	if err := stores[0].Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	for i := range sessions {
		createSession(b, stores[i%nodes], fmt.Sprintf("ses_%d", i), false)
	}
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
		s := stores[i%nodes]
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
	reportRate(b)
}

func reportRate(b *testing.B) {
	if secs := b.Elapsed().Seconds(); secs > 0 {
		b.ReportMetric(float64(b.N)/secs, "appends/s")
	}
}
