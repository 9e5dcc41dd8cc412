package longhaultype

// BuildInfo is GET /v1/version: which build of Longhaul a server runs, as
// the go command stamped it into the binary.
type BuildInfo struct {
	// Version is the module version: a tag such as "v1.4.0" for a build of
	// a released module, "(devel)" for a build from a checkout.
	Version string `json:"version"`
	// Revision is the VCS revision the binary was built from, with
	// RevisionTime its commit time (RFC 3339) and Modified whether the
	// work tree had uncommitted changes; empty when the build did not
	// record them (go build -buildvcs=false, go run, go test).
	Revision     string `json:"revision,omitempty"`
	RevisionTime string `json:"revision_time,omitempty"`
	Modified     bool   `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"go_version"`
}
