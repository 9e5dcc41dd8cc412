// Package storeutil holds what the storage drivers share that is not SQL:
// the in-process notification Hub that serves Store.Subscribe; Checks, the
// validation of store.*Params that every driver runs before it touches its
// database, so that all drivers refuse the same input with the same error
// (naming the field, wrapping no sentinel); and the loading and numbering
// of the embedded migrations (LoadMigrations). SQL, and anything else that
// depends on the database's dialect, stays in each driver.
//
// Invariants: Hub.Publish never blocks, and every subscription's channel is
// closed exactly once (on cancel, on its context's end or on Close). Checks
// reports nil parameters as an error rather than panicking, and differs
// between drivers only in StrictText, which is what a driver's text columns
// can store. LoadMigrations returns
// versions 1, 2, 3... without gaps, or an error.
//
// It imports the standard library and internal/store. Only storage drivers
// (internal/store/sqlite, internal/store/postgres) may import it: everyone
// else goes through the store.Store interface.
package storeutil
