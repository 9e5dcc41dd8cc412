package storeutil

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestLoadMigrations(t *testing.T) {
	ms, err := LoadMigrations(fstest.MapFS{
		"migrations/002_b.sql":   {Data: []byte("SELECT 2")},
		"migrations/001_a.sql":   {Data: []byte("SELECT 1")},
		"migrations/README":      {Data: []byte("not a migration")},
		"migrations/sub/003.sql": {Data: []byte("in a folder: ignored")},
	})
	require.NoError(t, err)
	require.Equal(t, []Migration{
		{Version: 1, Name: "001_a.sql", SQL: "SELECT 1"},
		{Version: 2, Name: "002_b.sql", SQL: "SELECT 2"},
	}, ms)

	_, err = LoadMigrations(fstest.MapFS{
		"migrations/001_a.sql": {Data: []byte("SELECT 1")},
		"migrations/003_c.sql": {Data: []byte("SELECT 1")},
	})
	require.ErrorContains(t, err, "003_c.sql")
	_, err = LoadMigrations(fstest.MapFS{"migrations/init.sql": {Data: []byte("SELECT 1")}})
	require.ErrorContains(t, err, "init.sql")
	_, err = LoadMigrations(fstest.MapFS{"migrations/0_zero.sql": {Data: []byte("SELECT 1")}})
	require.ErrorContains(t, err, "positive version")
	_, err = LoadMigrations(fstest.MapFS{
		"migrations/001_a.sql": {Data: []byte("SELECT 1")},
		"migrations/001_b.sql": {Data: []byte("SELECT 1")},
	})
	require.Error(t, err, "duplicate versions")
	_, err = LoadMigrations(fstest.MapFS{})
	require.ErrorContains(t, err, "read migrations")
}

func TestNewerSchemaError(t *testing.T) {
	require.EqualError(t, NewerSchemaError(7, 5),
		"database schema version 7 is newer than this driver's schema version 5: upgrade longhaul")
}

func TestSchemaMismatch(t *testing.T) {
	require.NoError(t, SchemaMismatch(5, 5))
	require.ErrorContains(t, SchemaMismatch(3, 5), "database schema version 3, driver schema version 5: run migrations")
	err := SchemaMismatch(6, 5)
	require.ErrorContains(t, err, "newer than this driver's schema version 5: upgrade longhaul")
	require.NotContains(t, err.Error(), "run migrations", "a newer database is fixed by a newer binary, not by migrating")
}
