package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// TestMain runs the watchers run's client process when the test binary is
// re-executed as one (testClients), and the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(clientsEnv) == "1" {
		if err := ServeWatcherClients(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testClients is the Config.ClientCommand of the package's tests and
// benchmarks: the test binary, re-executed.
var testClients = SelfClients(nil, clientsEnv+"=1")
