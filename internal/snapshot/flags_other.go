//go:build !unix

package snapshot

import "os"

// readFlags opens files for reading.
const readFlags = os.O_RDONLY
