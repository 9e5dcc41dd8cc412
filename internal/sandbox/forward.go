package sandbox

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Forward listens on the TCP address listen and relays every connection it
// accepts to the Unix socket at socket, both ways, until ctx is done; then it
// closes the listener and every open connection and returns nil. It runs
// inside a bwrap sandbox, as the hidden command ForwardCommand, so that
// programs there reach the server's egress proxy at ProxyListen: the
// sandbox's network namespace has only loopback, and the socket is its one
// way out.
func Forward(ctx context.Context, listen, socket string) error {
	return ForwardNotify(ctx, listen, socket, nil)
}

// ForwardNotify is Forward that calls ready (if not nil) once it listens,
// before it accepts anything.
func ForwardNotify(ctx context.Context, listen, socket string, ready func()) error {
	if listen == "" {
		return errors.New("forward: listen: is required")
	}
	if socket == "" {
		return errors.New("forward: socket: is required")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	if ready != nil {
		ready()
	}
	return serveForward(ctx, ln, socket)
}

// RunForwarder is what the hidden command ForwardCommand runs: Forward,
// announcing on stdout that it listens (ForwardReady and a newline) and then
// closing stdout if it can be closed. The sandbox's start-up script reads
// stdout to its end, so it goes on only once the forwarder listens, or has
// failed.
func RunForwarder(ctx context.Context, listen, socket string, stdout io.Writer) error {
	return ForwardNotify(ctx, listen, socket, func() {
		_, _ = io.WriteString(stdout, ForwardReady+"\n")
		if c, ok := stdout.(io.Closer); ok {
			_ = c.Close()
		}
	})
}

// ForwardMain runs the forwarder for a program other than the longhaul
// binary: args are what follows ForwardCommand (--listen ADDR --socket PATH),
// and the result is the exit code. A test binary that stands in for the
// longhaul binary as BwrapOptions.Forwarder (the default, os.Executable, is
// the test binary in tests) calls it first thing in TestMain:
//
//	if len(os.Args) > 1 && os.Args[1] == sandbox.ForwardCommand {
//		os.Exit(sandbox.ForwardMain(os.Args[2:]))
//	}
//
// Without that, the test binary run inside the sandbox would run the tests
// instead, and every command of a session with a proxy would wait for them.
func ForwardMain(args []string) int {
	fs := flag.NewFlagSet(ForwardCommand, flag.ContinueOnError)
	listen := fs.String("listen", ProxyListen, "TCP address to listen on")
	socket := fs.String("socket", ProxySocketPath, "Unix socket to relay to")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := RunForwarder(ctx, *listen, *socket, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// serveForward accepts on ln until ctx is done.
func serveForward(ctx context.Context, ln net.Listener, socket string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var conns sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer conns.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("forward: accept: %w", err)
		}
		conns.Go(func() { relay(ctx, c, socket) })
	}
}

// relay copies between c and a new connection to socket, half-closing each
// side when the other is done, so a client that shuts down its writing side
// still gets the whole answer.
func relay(ctx context.Context, c net.Conn, socket string) {
	defer c.Close()
	var d net.Dialer
	u, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return
	}
	defer u.Close()
	stop := context.AfterFunc(ctx, func() {
		c.Close()
		u.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { pipeHalf(u, c) })
	pipeHalf(c, u)
	wg.Wait()
}

// pipeHalf copies src to dst, then closes dst's writing side.
func pipeHalf(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		dst.Close()
	}
}
