// Package storeutil holds what the storage drivers share that is not SQL,
// so that each driver keeps only its SQL and its dialect's encodings:
//   - Checks, the validation of store.*Params and rows (webhook endpoints,
//     deliveries and claims included) that every driver runs before it
//     touches its database, so that all drivers refuse the same input with
//     the same error (naming the field, wrapping no sentinel), and Page, the
//     default and maximum length of each list;
//   - the projection bookkeeping: DocTables (each kind's table),
//     NormalizeDocs (a write's docs belong to its session) and Projections,
//     the projection reads (TurnList, ActionGet...) over the two queries and
//     the session lookup a driver supplies;
//   - the rows a driver builds before it writes: PrepareSessionCreate and
//     PrepareEventAppend check a journal write and number its events
//     (store.Numbered) and bind its docs (NormalizeDocs); NonNil stores an
//     absent list as [] and BlobData an empty blob as zero bytes;
//   - the in-process notification Hub that serves Store.Subscribe;
//   - Grouper, which runs queued writes (or reads) in groups, the caller
//     that finds a slot free running its group itself: SQLite's writer,
//     PostgreSQL's committer and session reads;
//   - the loading and numbering of the embedded migrations (LoadMigrations).
//
// SQL, and anything else that depends on the database's dialect (how a time
// or a list is encoded, how a claim locks), stays in each driver.
//
// Invariants: Hub.Publish never blocks, and every subscription's channel is
// closed exactly once (on cancel, on its context's end or on Close). Checks
// reports nil parameters as an error rather than panicking, and differs
// between drivers only in StrictText, which is what a driver's text columns
// can store, and JSONInDatabase, which leaves a document's validity to a
// database that parses it anyway (the driver checks again on a failure, so
// the same input is refused with the same error). Otherwise it checks the
// JSON syntax of every document it is given but those of an append its
// caller's encoder wrote (EventAppendParams.Encoded). LoadMigrations returns
// versions 1, 2, 3... without gaps, or an error.
//
// It imports the standard library and internal/store. Who may import it:
// internal/node, internal/store/postgres, internal/store/sqlite and tests.
// The node reads one bound (MaxNodeAddrs, what it announces); everyone else
// goes through the store.Store interface.
package storeutil
