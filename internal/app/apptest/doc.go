// Package apptest builds the application service for tests that serve or
// call it over a real engine (Engine: SQLite and the scripted model;
// EngineOn: any store, and Drivers, SQLite and PostgreSQL, for suites that
// run on both): the App as internal/node wires it, with a vault whose key
// file lives in a directory of its own (apart from the database, as it
// should), the webhooks' API and the reports.
//
// It imports internal/app and what an App is made of; as a test helper, its
// imports are not held to the module's import rules. Who may import it: no
// package of the module (tests aside).
package apptest
