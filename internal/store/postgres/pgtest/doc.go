// Package pgtest gives tests outside the PostgreSQL driver a database of
// their own: a fresh schema per test in the server that
// LONGHAUL_TEST_POSTGRES (or LONGHAUL_TEST_POSTGRES_URL) names, dropped when
// the test ends.
//
// Invariants: without the variable a test skips on a developer's machine
// and fails under CI=true, where PostgreSQL is required (.ci/run starts a
// throwaway cluster and sets the variable). A schema is created empty (the
// caller migrates it) with a random name, so tests run in parallel, and it
// is dropped after the test's other cleanups, so stores opened on it are
// closed first.
//
// It imports the standard library, pgx and testify's require. Who may import
// it: no package of the module (tests aside).
package pgtest
