// Package buildinfo says which build of Longhaul is running: the module
// version and VCS revision the go command stamps into every binary
// (runtime/debug.ReadBuildInfo), for GET /v1/version and `longhaul
// version`. It imports only the standard library and longhaultype. Who may
// import it: internal/app, cmd/longhaul and tests.
package buildinfo
