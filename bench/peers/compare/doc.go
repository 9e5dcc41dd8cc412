// Command compare runs `longhaul bench` and the peers (DBOS Transact Go,
// River) alternately on the same SQLite file system and the same
// PostgreSQL, round after round (Longhaul, then each peer, on SQLite, then
// the same on PostgreSQL), and prints each one's median agent-steps/s and
// the median of the rounds' ratios, Longhaul ÷ peer, for the serial and the
// concurrent run on each store. A ratio above 1 means Longhaul is faster.
//
// Run it from the peers module (bench/peers), or through the script
// bench/compare, which does that:
//
//	go run ./compare --url "$LONGHAUL_TEST_POSTGRES"
//
// It builds the longhaul command from the repository (--repo, two levels
// up) and the peers command from this module, so each round measures the
// code as it is. The SQLite databases of every system go to $TMPDIR; set
// it to a directory on the disk being measured (on tmpfs an fsync is free).
// Without --url (or $LONGHAUL_TEST_POSTGRES) the PostgreSQL runs are
// skipped.
//
// Who may import it: nobody; it is a command.
package main
