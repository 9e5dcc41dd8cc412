package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// DefaultMaxConns is the default size of the connection pool. Each running
// session reads its row at every step while the committers write, so a
// node running many sessions at once wants more connections than pgxpool's
// default (the larger of 4 and the number of CPUs) gives; connections are
// opened only as they are needed.
const DefaultMaxConns = 16

// DefaultSubscriberBuffer is the default capacity of a Subscribe channel.
const DefaultSubscriberBuffer = 256

// Config tunes the driver. A nil *Config, and every zero field, means the
// default named in the field's comment.
type Config struct {
	// Logger receives listener disconnections and applied migrations (never
	// the connection string). Default: a logger that discards everything.
	Logger *slog.Logger
	// MaxConns is the size of the connection pool, not counting the one
	// connection that LISTENs (of which the committer's and the id readers'
	// connections, hotPoolConfig; with 1, one more). Default: the
	// connection string's pool_max_conns, else 16 (DefaultMaxConns).
	MaxConns int
	// SubscriberBuffer is the capacity of each Subscribe channel; a
	// subscriber that falls further behind misses notifications. Default: 256
	// (DefaultSubscriberBuffer).
	SubscriberBuffer int
}

// withDefaults validates cfg and returns a copy with every zero field set.
func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	switch {
	case out.MaxConns < 0 || out.MaxConns > math.MaxInt32:
		return out, fmt.Errorf("config: MaxConns must be between 0 and %d, got %d", math.MaxInt32, out.MaxConns)
	case out.SubscriberBuffer < 0:
		return out, fmt.Errorf("config: SubscriberBuffer must not be negative, got %d", out.SubscriberBuffer)
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.SubscriberBuffer == 0 {
		out.SubscriberBuffer = DefaultSubscriberBuffer
	}
	return out, nil
}

// Store is the PostgreSQL implementation of store.Store. Create it with Open.
type Store struct {
	// Projections serves the projection reads (TurnList, ActionGet...)
	// over queryDocs and queryDoc.
	storeutil.Projections

	log  *slog.Logger
	pool *pgxpool.Pool
	// hot serves the committer and the id readers alone, each statement
	// with a generic plan (hotPoolConfig); pool serves everything else.
	hot *pgxpool.Pool
	// schema is where the tables live (the first schema of the search_path).
	schema string
	// channel is the NOTIFY channel of that schema; instance tells this
	// Store's notifications from other nodes'.
	channel  string
	instance string
	target   string
	hub      *storeutil.Hub
	lis      *listener
	notifier *notifier
	// committer runs appends and session creations in shared transactions.
	committer *committer
	// reader reads the sessions asked for at the same time in one statement.
	reader *idReader[*store.SessionRow]
	// seqs reads the last seqs asked for at the same time in one statement.
	seqs *idReader[int64]

	stop context.CancelFunc
	done sync.WaitGroup // the listener and the notifier

	closed    atomic.Bool
	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// Open connects to the database that dsn names, checks that its schema
// exists, and starts listening for other nodes' notifications (it returns
// once it listens, so a subscriber hears every commit after Open). It does
// not migrate: call Migrate (Ping reports an unmigrated database). Errors
// never contain dsn, which may hold a password.
func Open(ctx context.Context, dsn string, cfg *Config) (*Store, error) {
	return open(ctx, dsn, cfg, nil)
}

// open is Open; tune, when set, adjusts the listener before it starts
// (tests shorten its timings).
func open(ctx context.Context, dsn string, cfg *Config, tune func(*listener)) (*Store, error) {
	if dsn == "" {
		return nil, errors.New("open postgres store: connection string is empty")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors quote the string, redacting the password only
		// as far as it can tell where it is; say nothing of the string.
		return nil, errors.New("open postgres store: the connection string cannot be parsed " +
			"(it is not shown, as it may hold a password): want a postgres:// URL or key=value pairs")
	}
	password := pcfg.ConnConfig.Password
	target := describe(pcfg)
	fail := func(err error) error {
		return fmt.Errorf("open postgres store %s: %w", target, scrub(err, password))
	}
	switch {
	case c.MaxConns > 0:
		pcfg.MaxConns = int32(c.MaxConns)
	case !strings.Contains(dsn, "pool_max_conns"):
		pcfg.MaxConns = DefaultMaxConns
	}
	batchConns, err := takeBatchConns(pcfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store %s: %w", target, err)
	}
	if _, ok := pcfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "longhaul"
	}
	listenCfg := pcfg.ConnConfig.Copy()
	workers := committers(pcfg.MaxConns, runtime.GOMAXPROCS(0))
	if batchConns > 0 {
		workers = batchConns
	}
	hotCfg := hotPoolConfig(pcfg, workers)

	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fail(err)
	}
	hot, err := pgxpool.NewWithConfig(ctx, hotCfg)
	if err != nil {
		pool.Close()
		return nil, fail(err)
	}
	closePools := func() {
		hot.Close()
		pool.Close()
	}
	var (
		schema   *string
		encoding string
	)
	err = pool.QueryRow(ctx, `SELECT current_schema(), current_setting('server_encoding')`).Scan(&schema, &encoding)
	if err != nil {
		closePools()
		return nil, fail(err)
	}
	if schema == nil {
		closePools()
		return nil, fail(errors.New("the search_path names no schema that exists: create it, or fix search_path"))
	}
	if encoding != "UTF8" {
		// Journals hold any Unicode text; another encoding would refuse some.
		closePools()
		return nil, fail(fmt.Errorf("the database's encoding is %s, want UTF8 (CREATE DATABASE ... ENCODING 'UTF8')", encoding))
	}
	instance, err := newInstanceID()
	if err != nil {
		closePools()
		return nil, fail(err)
	}
	s := &Store{
		log:      c.Logger,
		pool:     pool,
		hot:      hot,
		schema:   *schema,
		channel:  channelName(*schema),
		instance: instance,
		target:   target + " schema " + strconv.Quote(*schema),
		hub:      storeutil.NewHub(c.SubscriberBuffer),
	}
	s.Projections = storeutil.Projections{Checks: checks, QueryList: s.queryDocs, QueryGet: s.queryDoc, SessionExists: s.sessionExists}
	s.lis = newListener(listenCfg, s.channel, s.instance, s.hub, s.log, s.target)
	if tune != nil {
		tune(s.lis)
	}
	conn, alive, err := s.lis.connect(ctx)
	if err != nil {
		closePools()
		return nil, fail(fmt.Errorf("listen: %w", err))
	}
	s.notifier = newNotifier(pool, s.channel, s.instance, func(err error) {
		s.log.Warn("postgres notify failed; other nodes miss these notifications", "target", s.target,
			"err", scrub(err, password))
	})
	s.committer = newCommitter(s, workers)
	s.reader = newSessionReader(s, workers)
	s.seqs = newSeqReader(s, workers)
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.done.Go(func() { s.lis.run(bg, conn, alive) })
	s.done.Go(func() { s.notifier.run(bg) })
	return s, nil
}

// committers is how many groups of writes may be in flight at once: while
// one waits for its commit, the next gathers the writes arriving meanwhile.
// A quarter of the pool (so reads and lease claims find connections), at
// most 4: more would make smaller groups, hence more commits, for no more
// throughput (PostgreSQL flushes the WAL for one commit at a time). And at
// most half the CPUs this process may use: a group runs its statements on
// one server backend, and where the server shares a small machine with the
// node, groups in parallel contend for its cores more than they overlap
// their waits (two CPUs, 64 sessions at once: one committer made 8–15 %
// more agent steps a second than four, and 25–35 % more with three nodes;
// docs/performance.md, 2026-12-04 late evening). The connection string's
// longhaul_batch_conns (BatchConnsParam) overrides it.
func committers(maxConns int32, cpus int) int {
	return min(4, max(1, cpus/2), max(1, int(maxConns)/4))
}

// hotPoolConfig carves out of the pool's size the connections of the writes
// and reads every step makes (the committer's groups and the id readers',
// workers of each: they never wait for a connection behind the other
// reads), at most half of it and at least one, and gives them generic
// plans: PostgreSQL plans a prepared statement again at each of its first
// five runs on each connection (and the append has 32 variants), which cost
// the server more than their runs in a benchmark's short sessions. All
// they run are lookups by primary key and the append's inserts and
// upserts, whose plan does not depend on the values; the claims, which
// depend on partial indexes, stay on the other connections, as every
// other statement. A connection string's own plan_cache_mode wins.
func hotPoolConfig(pcfg *pgxpool.Config, workers int) *pgxpool.Config {
	hot := pcfg.Copy()
	hot.MaxConns = int32(min(3*workers, max(1, int(pcfg.MaxConns)/2)))
	hot.MinConns = 0
	pcfg.MaxConns = max(1, pcfg.MaxConns-hot.MaxConns)
	pcfg.MinConns = min(pcfg.MinConns, pcfg.MaxConns)
	if _, set := hot.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		after := hot.AfterConnect
		hot.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			if after != nil {
				if err := after(ctx, conn); err != nil {
					return err
				}
			}
			return genericPlans(ctx, conn)
		}
	}
	return hot
}

// genericPlans makes conn plan its prepared statements once (PostgreSQL 12
// and later; an older server keeps its own choice).
func genericPlans(ctx context.Context, conn *pgx.Conn) error {
	v := conn.PgConn().ParameterStatus("server_version")
	major, _, _ := strings.Cut(v, ".")
	if n, err := strconv.Atoi(strings.TrimFunc(major, func(r rune) bool { return r < '0' || r > '9' })); err != nil || n < 12 {
		return nil
	}
	_, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	return err
}

// BatchConnsParam is the connection string's parameter that sets how many
// connections send groups of statements at once (see committers), for a
// node whose CPUs say little about the server's: a small node in front of
// a large database server, which can run more groups at once than half the
// node's CPUs.
const BatchConnsParam = "longhaul_batch_conns"

// takeBatchConns removes BatchConnsParam from cfg's parameters (pgx would
// send it to the server, which refuses a setting it does not know) and
// returns its value, 0 when it is absent. It is at least 1 and at most half
// the pool's size: a group holds one of the connections carved out for the
// groups (hotPoolConfig), at most half the pool.
func takeBatchConns(cfg *pgxpool.Config) (int, error) {
	v, ok := cfg.ConnConfig.RuntimeParams[BatchConnsParam]
	if !ok {
		return 0, nil
	}
	delete(cfg.ConnConfig.RuntimeParams, BatchConnsParam)
	n, err := strconv.Atoi(v)
	if most := max(1, int(cfg.MaxConns)/2); err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("the connection string's %s must be a whole number from 1 to half the pool's size (%d), got %q",
			BatchConnsParam, most, v)
	}
	return n, nil
}

// describe names the database without its password: user@host:port/database.
func describe(cfg *pgxpool.Config) string {
	cc := cfg.ConnConfig
	return fmt.Sprintf("%s@%s/%s", cc.User, net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))), cc.Database)
}

func newInstanceID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Target names the database and schema the store uses, without any
// password, for logs and banners: "user@host:port/database schema "name"".
func (s *Store) Target() string { return s.target }

// Schema returns the schema the store's tables live in.
func (s *Store) Schema() string { return s.schema }

// Close stops listening, sends the notifications still queued, waits for
// the calls in flight to finish, closes the connections and the
// subscribers' channels. Later calls to any method return store.ErrClosed;
// a second Close returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		// The writes already queued commit, and their notifications reach
		// the notifier before it stops.
		s.committer.stop()
		s.reader.stop()
		s.seqs.stop()
		s.stop()
		s.done.Wait()
		s.hot.Close()
		s.pool.Close()
		s.hub.Close()
	})
	return nil
}

// Ping checks that the database answers and that its schema is the one this
// driver knows (so an unmigrated database is not ready).
func (s *Store) Ping(ctx context.Context) error {
	current, known, err := s.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if current != known {
		return fmt.Errorf("ping: %w", storeutil.SchemaMismatch(current, known))
	}
	return nil
}

// checkOpen returns store.ErrClosed once Close has started.
func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// Subscribe returns the notifications committed after the call, by this
// node or any other, until cancel is called, ctx ends or the store closes;
// each closes the channel. The channel holds Config.SubscriberBuffer
// notifications; a subscriber that falls further behind misses some and must
// re-read the store.
func (s *Store) Subscribe(ctx context.Context) (<-chan store.Notification, func()) {
	return s.hub.Subscribe(ctx)
}
