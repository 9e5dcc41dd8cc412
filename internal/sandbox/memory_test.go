package sandbox

import (
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStartMemoryBytes: a program started without an address-space limit
// but with MemoryBytes lives in a memory cgroup of its own: one that
// touches more memory than that is killed by the kernel, and says so
// (OutOfMemory); one that stays under it runs to its end. The server (this
// test's process) is not touched, and the cgroup is removed.
func TestStartMemoryBytes(t *testing.T) {
	t.Parallel()
	if ok, why := MemoryBound(); !ok {
		// Not every host delegates the memory controller (a container
		// without cgroup write access): the browser is then bounded by
		// its V8 heap limit alone, as the package documentation says.
		t.Skipf("no memory cgroup here: %s", why)
	}
	for name, tc := range startBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, tc2 := range []struct {
				mb      int
				killed  bool
				comment string
			}{{mb: 256, killed: true, comment: "past the limit"}, {mb: 8, killed: false, comment: "under it"}} {
				p, err := tc.b.Start(t.Context(), Spec{SessionID: "ses_test", Workspace: t.TempDir(), Limits: Limits{MemoryBytes: 64 << 20}},
					&StartRequest{Command: "dd if=/dev/zero of=/dev/null bs=" + strconv.Itoa(tc2.mb) + "M count=1 2>/dev/null; echo survived", UnboundedAddressSpace: true, MemoryBytes: 64 << 20})
				require.NoError(t, err)
				out, err := io.ReadAll(p.Stdout())
				require.NoError(t, err)
				p.Stop(10 * time.Second)
				<-p.Done()
				require.Equal(t, tc2.killed, p.OutOfMemory(), tc2.comment)
				// The shell lives on after dd is killed: only the process
				// past the limit goes.
				require.Equal(t, "survived\n", string(out), tc2.comment)
				require.NotNil(t, p.memory, "the program has a memory cgroup")
				require.NoDirExists(t, p.memory.dir, "the memory cgroup is removed")
			}
		})
	}
}
