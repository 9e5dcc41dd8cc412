package sandbox

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestForwardRelaysBothWays(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "s.sock")
	uln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer uln.Close()
	// An upper-casing echo server that answers once its client is done
	// writing: the relay must pass the half-close on.
	go func() {
		for {
			c, err := uln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				_, _ = c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()

	// Find a free port, then let Forward listen on it.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := probe.Addr().String()
	require.NoError(t, probe.Close())

	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- ForwardNotify(ctx, addr, sock, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("forwarder ended: %v", err)
	}

	for _, msg := range []string{"hello", "second connection"} {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = c.Write([]byte(msg))
		require.NoError(t, err)
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
		got, err := io.ReadAll(bufio.NewReader(c))
		require.NoError(t, err)
		require.Equal(t, strings.ToUpper(msg), string(got))
		c.Close()
	}

	cancel()
	require.NoError(t, <-done)
	_, err = net.Dial("tcp", addr)
	require.Error(t, err, "the listener is closed")
}

func TestRunForwarderAnnouncesAndCloses(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- RunForwarder(ctx, "127.0.0.1:0", "/nonexistent.sock", w) }()
	got, err := io.ReadAll(r) // EOF only once the forwarder closed it
	require.NoError(t, err)
	require.Equal(t, ForwardReady+"\n", string(got))
	cancel()
	require.NoError(t, <-done)
}

func TestForwardErrors(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, Forward(t.Context(), "", "/x.sock"), "listen")
	require.ErrorContains(t, Forward(t.Context(), "127.0.0.1:0", ""), "socket")
	require.ErrorContains(t, Forward(t.Context(), "not an address", "/x.sock"), "forward")
}
