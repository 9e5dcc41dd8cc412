package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"

	// Registers the "sqlite" database/sql driver.
	_ "modernc.org/sqlite"
)

// Defaults for the zero fields of Config.
const (
	DefaultMaxBatch         = 256
	DefaultReadConns        = 4
	DefaultBusyTimeout      = 5 * time.Second
	DefaultSubscriberBuffer = 256
)

// The writer connection's page cache and WAL checkpoint thresholds (see
// Open and checkpointer). None changes what a commit makes durable: the
// WAL is fsynced at every commit whatever its length.
const (
	writerCacheKiB = 32 << 10
	// The background checkpointer is woken each time the commits have
	// written this many pages to the WAL. It also sets how large the WAL
	// gets: SQLite writes it again from its beginning only once a
	// checkpoint has copied all of it (one a reader's snapshot held back
	// leaves it to the next), and the walGrower grows it with zeros up
	// to walCheckpointPages frames, each step of which the next commit's
	// fdatasync writes (about 0.5 ms more, once per walGrowStep frames).
	// So after an Open the serial commits pay that until the WAL is as
	// large as it gets: at 4,096 here (34 MB of WAL), for about their
	// first nine hundred; at 2,048 (17 MB), for half as many. Lower, the
	// checkpoints copy the pages every append rewrites (a session's
	// row, the indexes' right edges) and sync the database file more
	// often, for little more (docs/performance.md, 2026-12-08).
	backgroundCheckpointPages = 2048
	// The writer's own automatic checkpoint, for when the background one
	// falls behind (a reader's snapshot keeps SQLite from writing the WAL
	// again from its beginning, and the next checkpoint comes at twice
	// the pages).
	walCheckpointPages = 2 * backgroundCheckpointPages
)

// Config tunes the driver. A nil *Config, and every zero field, means the
// default named in the field's comment.
type Config struct {
	// Logger receives batch failures and applied migrations. Default: a
	// logger that discards everything.
	Logger *slog.Logger
	// MaxBatch caps how many write requests share one transaction (and one
	// fsync). Larger batches amortise more under load; a request never waits
	// for a batch to fill. Default: 256 (DefaultMaxBatch).
	MaxBatch int
	// ReadConns is the size of the read-only connection pool. Default: 4
	// (DefaultReadConns).
	ReadConns int
	// BusyTimeout is how long a connection waits for a lock held by another
	// connection or process (SQLite's busy_timeout) before failing. Default:
	// 5s (DefaultBusyTimeout).
	BusyTimeout time.Duration
	// SubscriberBuffer is the capacity of each Subscribe channel; a
	// subscriber that falls further behind misses notifications. Default: 256
	// (DefaultSubscriberBuffer).
	SubscriberBuffer int
	// Now is the clock for the driver's own bookkeeping timestamps
	// (schema_migrations.applied_at) and the runners' liveness (the
	// store's clock, which the nodes share); every other time comes from
	// the caller's parameters. Default: time.Now.
	Now func() time.Time
}

// withDefaults validates cfg and returns a copy with every zero field set.
func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	switch {
	case out.MaxBatch < 0:
		return out, fmt.Errorf("config: MaxBatch must not be negative, got %d", out.MaxBatch)
	case out.ReadConns < 0:
		return out, fmt.Errorf("config: ReadConns must not be negative, got %d", out.ReadConns)
	case out.BusyTimeout < 0:
		return out, fmt.Errorf("config: BusyTimeout must not be negative, got %s", out.BusyTimeout)
	case out.SubscriberBuffer < 0:
		return out, fmt.Errorf("config: SubscriberBuffer must not be negative, got %d", out.SubscriberBuffer)
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.MaxBatch == 0 {
		out.MaxBatch = DefaultMaxBatch
	}
	if out.ReadConns == 0 {
		out.ReadConns = DefaultReadConns
	}
	if out.BusyTimeout == 0 {
		out.BusyTimeout = DefaultBusyTimeout
	}
	if out.SubscriberBuffer == 0 {
		out.SubscriberBuffer = DefaultSubscriberBuffer
	}
	return out, nil
}

// Store is the SQLite implementation of store.Store. Create it with Open.
type Store struct {
	// Projections serves the projection reads (TurnList, ActionGet...)
	// over queryDocs and queryDoc.
	storeutil.Projections

	cfg    Config
	log    *slog.Logger
	path   string
	hub    *storeutil.Hub
	seqs   *lastSeqs // the sessions' last seqs, as the writer committed them
	w      *writer
	read   *sql.DB
	rstmts stmtCache

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating it if missing) the database file at path and starts
// the writer. The directory must exist. Open does not migrate: call Migrate
// (Ping reports an unmigrated database).
func Open(ctx context.Context, path string, cfg *Config) (*Store, error) {
	if path == "" {
		return nil, errors.New("open sqlite store: path is empty")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: path %q: %w", path, err)
	}
	// SQLite would create the file with 0644 less the umask; the journal
	// of sessions is nobody else's to read. Created here with 0600, the
	// database also gives its -wal and -shm files that mode (SQLite
	// creates them with the database's permissions).
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", abs, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", abs, err)
	}
	syncWithFdatasync()
	walVFS, err := registerWALBufferVFS()
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", abs, err)
	}
	busy := strconv.FormatInt(c.BusyTimeout.Milliseconds(), 10)

	wdb, err := sql.Open("sqlite", dsn(abs, walVFS, []string{
		"busy_timeout(" + busy + ")",
		"journal_mode(WAL)",
		"synchronous(FULL)",
		"foreign_keys(1)",
		// Group commit wraps each request in a savepoint; keep savepoint
		// journals (and other temporaries) in memory, not in temp files.
		"temp_store(MEMORY)",
		// The writer's page cache (in KiB: SQLite's default is 2 MiB).
		// Too small, a batch of appends spills dirty pages to the WAL
		// before its commit and reads back the pages of the sessions
		// and indexes it just evicted.
		"cache_size(" + strconv.Itoa(-writerCacheKiB) + ")",
		// How many WAL pages (4 KiB) a commit may leave before it copies
		// them into the database itself (SQLite's default: 1,000). Every
		// append rewrites its session's row and the same index pages:
		// copied once for many commits, not once for a few. The
		// background checkpointer copies them first, at half as many
		// (backgroundCheckpointPages).
		"wal_autocheckpoint(" + strconv.Itoa(walCheckpointPages) + ")",
	}))
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", abs, err)
	}
	// The writer owns the one connection for the store's life.
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	conn, err := wdb.Conn(ctx)
	if err != nil {
		_ = wdb.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", abs, err)
	}
	if err := checkWAL(ctx, conn); err != nil {
		_ = conn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", abs, err)
	}
	var pageSize int64
	if err := conn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		_ = conn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("open sqlite store %s: read page_size: %w", abs, err)
	}

	rdb, err := sql.Open("sqlite", dsn(abs, "", []string{
		"busy_timeout(" + busy + ")",
		"foreign_keys(1)",
		// Readers never write; query_only turns a bug into an error.
		"query_only(1)",
	}))
	if err != nil {
		_ = conn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", abs, err)
	}
	rdb.SetMaxOpenConns(c.ReadConns)
	rdb.SetMaxIdleConns(c.ReadConns)
	rdb.SetConnMaxLifetime(0)
	rdb.SetConnMaxIdleTime(0)
	if err := rdb.PingContext(ctx); err != nil {
		_ = rdb.Close()
		_ = conn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", abs, err)
	}

	// The background checkpointer's connection: it only ever runs
	// PRAGMA wal_checkpoint, with the writer's durability.
	cdb, err := sql.Open("sqlite", dsn(abs, "", []string{
		"busy_timeout(" + busy + ")",
		"synchronous(FULL)",
	}))
	if err != nil {
		_ = rdb.Close()
		_ = conn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", abs, err)
	}
	cdb.SetMaxOpenConns(1)
	cdb.SetMaxIdleConns(1)
	cdb.SetConnMaxLifetime(0)
	cdb.SetConnMaxIdleTime(0)

	s := &Store{
		cfg:  c,
		log:  c.Logger,
		path: abs,
		hub:  storeutil.NewHub(c.SubscriberBuffer),
		seqs: newLastSeqs(),
		read: rdb,
	}
	s.Projections = storeutil.Projections{Checks: checks, QueryList: s.queryDocs, QueryGet: s.queryDoc, SessionExists: s.sessionExists}
	s.rstmts.prepare = rdb.PrepareContext
	var wal *walGrower
	if growWAL(filepath.Dir(abs)) {
		wal = newWALGrower(abs, pageSize, walCheckpointPages, c.Logger)
	}
	s.w = newWriter(wdb, conn, c.MaxBatch, s.hub, s.seqs, c.Logger, newCheckpointer(cdb, c.Logger), wal)
	return s, nil
}

// dsn builds a file: URI for path with the given PRAGMAs. The URI form (with
// the path escaped) keeps a '?' or '#' in a file name from being read as the
// start of the parameters.
func dsn(path, vfs string, pragmas []string) string {
	q := url.Values{}
	if vfs != "" {
		q.Set("vfs", vfs)
	}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	if !strings.HasPrefix(u.Path, "/") {
		// A Windows path (C:/...) needs the empty authority too.
		u.Path = "/" + u.Path
	}
	return u.String()
}

// checkWAL verifies that the database is in WAL mode: on a file system that
// cannot share memory between connections SQLite silently keeps the rollback
// journal, and readers would then block the writer. And that the writer
// syncs the WAL at every commit (synchronous FULL or EXTRA): its VFS
// (walBufferVFS) writes a commit's frames when SQLite syncs them, which in
// a lighter mode it would not before other connections may read them.
func checkWAL(ctx context.Context, conn *sql.Conn) error {
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal_mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	var sync int
	if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return fmt.Errorf("read synchronous: %w", err)
	}
	if sync < 2 {
		return fmt.Errorf("synchronous is %d, want 2 (FULL) or 3 (EXTRA)", sync)
	}
	return nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close waits for the queued writes to commit, stops the writer, closes the
// subscribers' channels and the connections. Later calls to any method return
// store.ErrClosed; a second Close returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		var errs []error
		if err := s.w.close(); err != nil {
			errs = append(errs, fmt.Errorf("close writer: %w", err))
		}
		s.hub.Close()
		s.rstmts.closeAll()
		if err := s.read.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close readers: %w", err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
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

// stmtCache prepares each query once per database handle and keeps the
// statement for the store's life. Statements are prepared lazily because a
// table may not exist until Migrate ran; a failed prepare is not cached.
type stmtCache struct {
	prepare func(ctx context.Context, query string) (*sql.Stmt, error)
	mu      sync.RWMutex
	m       map[string]*sql.Stmt
}

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.RLock()
	st, ok := c.m[query]
	c.mu.RUnlock()
	if ok {
		return st, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	st, err := c.prepare(ctx, query)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = make(map[string]*sql.Stmt)
	}
	c.m[query] = st
	return st, nil
}

func (c *stmtCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		_ = st.Close()
		delete(c.m, q)
	}
}
