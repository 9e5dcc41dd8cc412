// Package freespacetest gives tests a small file system they can fill: a
// tmpfs of a few MiB mounted for the test's life. Mounting needs root (CI
// runs as root); elsewhere the test is skipped, except under CI=true where
// a test that cannot run must fail rather than pass unseen.
//
// It imports the standard library only. Who may import it: no package of the
// module (tests aside).
package freespacetest
