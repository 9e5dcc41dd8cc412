//go:build !linux

package sandbox

// measureWorkspace walks the workspace at every measure: the usage tracker
// of usagetrack_linux.go needs inotify.
func measureWorkspace(ws string, owner *ids) (int64, error) {
	return scanWorkspace(ws, owner)
}

// walkWorkspace walks the workspace, as everything does here.
func walkWorkspace(ws string, owner *ids) (int64, error) {
	return scanWorkspace(ws, owner)
}
