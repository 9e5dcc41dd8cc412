package postgres

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
)

// password is what the tests put in connection strings; it must appear in
// no error and no log line.
const password = "Sup3r-Secret-pa55word"

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// TestOpenErrorsHideThePassword: whatever goes wrong, an error of Open
// never contains the connection string's password.
func TestOpenErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	port := strconv.Itoa(closedPort(t))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cases := map[string]string{
		"unreachable URL":        "postgres://longhaul:" + password + "@127.0.0.1:" + port + "/db?connect_timeout=5",
		"unreachable key=value":  "host=127.0.0.1 port=" + port + " user=longhaul password=" + password + " dbname=db connect_timeout=5",
		"quoted key=value":       "host=127.0.0.1 port=" + port + " password='" + password + "' connect_timeout=5",
		"bad port in URL":        "postgres://longhaul:" + password + "@127.0.0.1:notaport/db",
		"bad escape in URL":      "postgres://longhaul:" + password + "%zz@127.0.0.1/db",
		"unknown sslmode":        "postgres://longhaul:" + password + "@127.0.0.1:" + port + "/db?sslmode=sometimes",
		"unterminated key=value": "host=127.0.0.1 password='" + password,
		"garbage":                "postgres://:" + password + "@[::1",
		"password in query":      "postgres://127.0.0.1:" + port + "/db?password=" + password + "&connect_timeout=5",
	}
	for name, dsn := range cases {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			s, err := Open(ctx, dsn, &Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			require.Error(t, err)
			require.Nil(t, s)
			require.NotContains(t, err.Error(), password)
			require.NotContains(t, logs.String(), password)
			require.Contains(t, err.Error(), "open postgres store")
		})
	}
	_, err := Open(ctx, "", nil)
	require.ErrorContains(t, err, "connection string is empty")
	_, err = Open(ctx, "postgres://127.0.0.1/db", &Config{MaxConns: -1})
	require.ErrorContains(t, err, "MaxConns")
	_, err = Open(ctx, "postgres://127.0.0.1/db", &Config{SubscriberBuffer: -1})
	require.ErrorContains(t, err, "SubscriberBuffer")
}

func TestScrub(t *testing.T) {
	t.Parallel()
	cause := context.DeadlineExceeded
	err := scrub(&wrapped{msg: "dial user:" + password + "@host", err: cause}, password)
	require.Equal(t, "dial user:xxxxx@host", err.Error())
	require.ErrorIs(t, err, cause, "the cause stays matchable")
	plain := &wrapped{msg: "no secret here", err: cause}
	require.Same(t, plain, scrub(plain, password).(*wrapped))
	require.Same(t, plain, scrub(plain, "").(*wrapped))
	require.NoError(t, scrub(nil, password))
}

type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// lockedBuffer is a log sink written by the listener's goroutine and read
// by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPasswordNeverLogged runs a store whose connection string holds a
// password through migrations, a lost listener connection and a refused
// schema; the password appears in no log line and no error.
func TestPasswordNeverLogged(t *testing.T) {
	t.Parallel()
	dsn := pgtest.WithParam(t, pgtest.FreshSchema(t), "password", password)
	var logs lockedBuffer
	s, err := open(t.Context(), dsn, &Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		func(l *listener) { l.minBackoff = 10 * time.Millisecond })
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(t.Context()))
	listens := s.lis.listens.Load()
	pgtest.Exec(t, "SELECT pg_terminate_backend($1)", int64(s.lis.pid.Load()))
	poll(t, "the listener reconnects", func() bool { return s.lis.listens.Load() > listens })
	poll(t, "the reconnection is logged", func() bool { return strings.Contains(logs.String(), "reconnected") })
	require.NotContains(t, logs.String(), password)
	require.Contains(t, logs.String(), "migration applied")
	require.NotContains(t, s.Target(), password)

	_, err = Open(t.Context(), pgtest.WithParam(t, dsn, "search_path", "no_such_schema_here"), nil)
	require.ErrorContains(t, err, "no schema")
	require.NotContains(t, err.Error(), password)
	require.ErrorContains(t, err, "search_path")
}

func TestTarget(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	require.Contains(t, s.Target(), "schema \""+s.Schema()+"\"")
	require.True(t, strings.HasPrefix(s.Schema(), "longhaul_test_"))
}

// TestSchemasAreSeparate: two deployments in two schemas of one database
// share nothing, notifications included.
func TestSchemasAreSeparate(t *testing.T) {
	t.Parallel()
	a := openMigrated(t, nil)
	b := openMigrated(t, nil)
	require.NotEqual(t, a.channel, b.channel)
	ch, cancel := b.Subscribe(t.Context())
	defer cancel()
	createSession(t, a, "ses_a", true)
	_, err := b.SessionGet(t.Context(), "ses_a")
	require.ErrorIs(t, err, store.ErrNotFound)
	createSession(t, b, "ses_b", false)
	require.Equal(t, store.Notification{Kind: store.KindEvents, SessionID: "ses_b", Seq: 1, Status: "queued"}, receive(t, ch),
		"b's subscriber hears b's commit, and nothing of a's before it")
}

func TestChannelName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "longhaul.public", channelName("public"))
	long := channelName(strings.Repeat("s", 100))
	require.LessOrEqual(t, len(long), 63)
	require.NotEqual(t, long, channelName(strings.Repeat("s", 101)))
}

func TestAddresses(t *testing.T) {
	got, err := Addresses("postgres://u:secret-pw@db.internal:6543,10.0.0.7/longhaul?sslmode=disable")
	require.NoError(t, err)
	require.Equal(t, []string{"db.internal:6543", "10.0.0.7:5432"}, got)
	got, err = Addresses("postgres://u@[::1]:5433/longhaul")
	require.NoError(t, err)
	require.Equal(t, []string{"[::1]:5433"}, got)
	got, err = Addresses("postgres:///longhaul?host=/var/run/postgresql")
	require.NoError(t, err)
	require.Empty(t, got, "a unix socket is no network address")
	_, err = Addresses("postgres://u:secret-pw@db:notaport/x")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret-pw")
}

// TestCommittersFollowThePoolAndTheCPUs: a quarter of the pool, at most
// four, and at most half the CPUs, never none.
func TestCommittersFollowThePoolAndTheCPUs(t *testing.T) {
	for _, tc := range []struct {
		conns int32
		cpus  int
		want  int
	}{
		{DefaultMaxConns, 1, 1},
		{DefaultMaxConns, 2, 1}, // a 2-core machine shared with its server
		{DefaultMaxConns, 4, 2},
		{DefaultMaxConns, 8, 4},
		{DefaultMaxConns, 64, 4},
		{4, 64, 1},
		{8, 64, 2},
		{1, 64, 1},
		{64, 64, 4},
	} {
		require.Equal(t, tc.want, committers(tc.conns, tc.cpus), "%d connections, %d CPUs", tc.conns, tc.cpus)
	}
}

// TestHotConnectionsCarvedOutOfThePool: the committer's and the id readers'
// connections (three per committer, at most half the pool, at least one)
// come out of the pool's size, never more in all but for a pool of one.
func TestHotConnectionsCarvedOutOfThePool(t *testing.T) {
	for _, tc := range []struct {
		conns, minConns int32
		workers         int
		hot, rest       int32
	}{
		{DefaultMaxConns, 0, 1, 3, 13},
		{DefaultMaxConns, 0, 2, 6, 10},
		{DefaultMaxConns, 0, 4, 8, 8},
		{DefaultMaxConns, 16, 4, 8, 8},
		{4, 0, 1, 2, 2},
		{2, 0, 1, 1, 1},
		{1, 0, 1, 1, 1},
	} {
		pcfg, err := pgxpool.ParseConfig("postgres://127.0.0.1/db")
		require.NoError(t, err)
		pcfg.MaxConns, pcfg.MinConns = tc.conns, tc.minConns
		hot := hotPoolConfig(pcfg, tc.workers)
		require.Equal(t, []int32{tc.hot, tc.rest}, []int32{hot.MaxConns, pcfg.MaxConns}, "%d connections, %d committers", tc.conns, tc.workers)
		require.LessOrEqual(t, pcfg.MinConns, pcfg.MaxConns)
		require.Zero(t, hot.MinConns)
		require.NotNil(t, hot.AfterConnect)
	}
	pcfg, err := pgxpool.ParseConfig("postgres://127.0.0.1/db?plan_cache_mode=auto")
	require.NoError(t, err)
	require.Nil(t, hotPoolConfig(pcfg, 1).AfterConnect, "the connection string's plan_cache_mode wins")
}

// TestHotConnectionsPlanOnce: the committer's connections plan generically;
// the others (the claims') keep the server's choice.
func TestHotConnectionsPlanOnce(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	mode := func(pool *pgxpool.Pool) string {
		var m string
		require.NoError(t, pool.QueryRow(t.Context(), "SHOW plan_cache_mode").Scan(&m))
		return m
	}
	require.Equal(t, "force_generic_plan", mode(s.hot))
	require.Equal(t, "auto", mode(s.pool))
	createSession(t, s, "ses_h", false)
	_, err := s.EventAppend(t.Context(), appendParams("ses_h", 1, 1))
	require.NoError(t, err)
	seq, err := s.SessionLastSeq(t.Context(), "ses_h")
	require.NoError(t, err)
	require.Equal(t, int64(2), seq)
}

// TestBatchConnsFromTheConnectionString: longhaul_batch_conns sets how many
// connections send groups at once, in the URL and key=value forms alike; it
// is never sent to the server (which would refuse to connect); a value that
// is not a count from 1 to half the pool's size is refused, naming the
// parameter.
func TestBatchConnsFromTheConnectionString(t *testing.T) {
	base := pgtest.FreshSchema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, pgtest.WithParam(t, pgtest.WithParam(t, base, "pool_max_conns", "16"), BatchConnsParam, "3"), nil)
	require.NoError(t, err)
	require.Equal(t, 3, s.committer.groups.Workers())
	require.Equal(t, 3, s.reader.groups.Workers())
	require.Equal(t, 3, s.seqs.groups.Workers())
	require.Equal(t, int32(8), s.hot.Config().MaxConns, "three connections a group, at most half the pool")
	// Open queried the pool and the listener connected: the server would
	// have refused a parameter it does not know. Another connection too.
	var one int
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT 1").Scan(&one))
	s.Close()

	s, err = Open(ctx, base, nil)
	require.NoError(t, err)
	require.Equal(t, committers(DefaultMaxConns, runtime.GOMAXPROCS(0)), s.committer.groups.Workers())
	s.Close()

	for _, v := range []string{"0", "-1", "9", "two", ""} {
		s, err := Open(ctx, pgtest.WithParam(t, pgtest.WithParam(t, base, "pool_max_conns", "16"), BatchConnsParam, v), nil)
		require.Error(t, err, "%s=%q", BatchConnsParam, v)
		require.Nil(t, s)
		require.Contains(t, err.Error(), BatchConnsParam)
	}
}
