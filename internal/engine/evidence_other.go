//go:build !unix

package engine

import "os"

// evidenceReadFlags: see evidence_unix.go.
const evidenceReadFlags = os.O_RDONLY
