package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/store"
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
	benchConcurrent(b, 1, twoEvents)
}

// BenchmarkAppendStepConcurrent64: the same with appends shaped as an
// agent step's (stepAppend): six events, the turn's doc updated, an effect
// and a checkpoint inserted, a 2 kB state. The server's CPU an append is
// what the statement's shape changes: measure it from the server's
// processes around a run.
func BenchmarkAppendStepConcurrent64(b *testing.B) {
	benchConcurrent(b, 1, stepAppend)
}

// BenchmarkAppendConcurrent64ThreeNodes: the same load spread over three
// nodes (three stores, each with its own pool and listener) on one schema.
func BenchmarkAppendConcurrent64ThreeNodes(b *testing.B) {
	benchConcurrent(b, 3, twoEvents)
}

// twoEvents is the append benchmarks' usual append: two small events.
func twoEvents(id string, last int64) *store.EventAppendParams {
	return appendParams(id, last, 2)
}

// stepAppend is an append shaped as an agent step's on the engine (the
// model's answer, the tool's call in three events, a checkpoint, the next
// model request): six events of 100-400 bytes, the turn's doc (created
// with the session by the first append, updated by the others), a new
// effect and a new checkpoint, and a state of about 2 kB.
func stepAppend(id string, last int64) *store.EventAppendParams {
	p := appendParams(id, last, 6)
	n := strconv.FormatInt(last, 10)
	p.State = json.RawMessage(`{"session":{"id":"` + id + `","last_event_seq":` + n + `,"usage":{"input_tokens":100,"output_tokens":10}},"pad":"` +
		strings.Repeat("state ", 320) + `"}`)
	for i := range p.Events {
		p.Events[i].TurnID, p.Events[i].Step, p.Events[i].WorkerID = "turn_"+id, int(last), "node-0"
		p.Events[i].Data = json.RawMessage(`{"step":` + n + `,"call_id":"call_0","tool":"noop","arguments":{"i":0},"arguments_sha256":"` +
			strings.Repeat("e9", 32) + `","i":` + strconv.Itoa(i) + `}`)
	}
	doc := func(kind store.DocKind, docID string) store.DocWrite {
		return store.DocWrite{Kind: kind, ID: docID, Status: "done", CreatedAt: testTime,
			Doc: json.RawMessage(`{"id":"` + docID + `","session_id":"` + id + `","step":` + n + `,"summary":"` + strings.Repeat("x", 300) + `"}`)}
	}
	p.Docs = []store.DocWrite{doc(store.DocTurn, "turn_"+id), doc(store.DocEffect, "eff_"+id+"_"+n), doc(store.DocCheckpoint, "ckpt_"+id+"_"+n)}
	return p
}

func benchConcurrent(b *testing.B, nodes int, params func(id string, last int64) *store.EventAppendParams) {
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
				p := params(id, last)
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
	reportRate(b)
}

func reportRate(b *testing.B) {
	if secs := b.Elapsed().Seconds(); secs > 0 {
		b.ReportMetric(float64(b.N)/secs, "appends/s")
	}
}
