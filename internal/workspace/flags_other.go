//go:build !unix

package workspace

import "os"

// readFlags opens files for reading.
const readFlags = os.O_RDONLY
