// Package sandbox runs the programs of a session's tools (the shell tool's
// commands) in the session's environment, behind one interface: a Backend
// gives, for a Spec (the session's workspace, its egress proxy socket and its
// Limits), a tool.Exec that runs `sh -c COMMAND` there and returns a
// tool.ExecResult; and Start, for a long-lived program the caller talks to
// over its stdin and stdout (an MCP server over stdio), set up the same way
// and under the same limits but the wall time and the output limit, until
// Process.Stop (stdin closed, then the process group killed after a grace
// period) or Kill. Detect picks the backend once at start-up: bwrap when
// bubblewrap works on the machine (it runs a trivial sandbox to know), else
// local, with a warning for the operator.
//
// # The bwrap backend
//
// Each run is one bubblewrap sandbox, started fresh and torn down when the
// command ends. It gets new user, pid, ipc, uts, network and (when the kernel
// allows) cgroup namespaces (--unshare-all --unshare-user; the network is
// never shared), runs as uid/gid 1000 "sandbox" with every capability dropped,
// may not create further user namespaces (--disable-userns, when the bwrap
// has it), is in a new terminal session (--new-session: no TIOCSTI into the
// server's terminal) and dies with its parent (--die-with-parent).
//
// What it sees, and nothing else:
//
//	/usr, and /bin /sbin /lib* (as symlinks into /usr, or read-only binds)  read-only
//	/etc: only ld.so.cache and ld.so.conf*, alternatives, ssl/certs,
//	  ssl/openssl.cnf, ca-certificates*, pki/{ca-trust,tls/certs},
//	  localtime, timezone, nsswitch.conf, host.conf, gai.conf, protocols,
//	  services, mime.types, os-release, shells, profile, bash.bashrc,
//	  inputrc, perl, python3, crypto-policies (those that exist)        read-only
//	/etc/passwd, /etc/group, /etc/hosts  generated (sandbox, nobody; localhost)
//	/proc       a new procfs: only the sandbox's own processes
//	/dev        a minimal one (null, zero, full, random, urandom, tty, pts, shm)
//	/tmp        a private tmpfs of Limits.TmpBytes (when bwrap has --size)
//	/workspace  the session's workspace (Spec.Workspace), read-write: the
//	            command's working directory and HOME
//	/run/longhaul/proxy.sock, /run/longhaul/longhaul  only with a ProxySocket
//
// The root is then remounted read-only, so the workspace and /tmp are the
// only writable places. The server's data directory, its sockets, its
// configuration, /etc/shadow, /etc/ssl/private, home directories, /var and other
// sessions' workspaces are simply not mounted. The workspace is mounted at
// /workspace rather than at its host path, so paths a command writes into
// files (virtualenvs, build caches) stay valid when the session is forked or
// restored on another node.
//
// The environment is cleared (--clearenv) and holds only PATH (DefaultPath),
// HOME=/workspace, TMPDIR=/tmp, LANG=C.UTF-8, USER and LOGNAME, the request's
// Env (the shell tool passes LONGHAUL_SESSION_ID and
// LONGHAUL_IDEMPOTENCY_KEY), and the proxy variables below, which a request
// cannot override.
//
// Network: the network namespace has only loopback, and no route: the host's
// loopback (the server's API port), the machine's networks and 169.254.169.254
// are unreachable, and nothing leaves the machine. With Spec.ProxySocket set,
// the proxy's Unix socket and the longhaul binary (BwrapOptions.Forwarder) are
// mounted read-only under /run/longhaul, and before the command the sandbox
// starts `longhaul __sandbox-forward` (Forward) on ProxyListen
// (127.0.0.1:3128), waits until it listens, and sets HTTP_PROXY, HTTPS_PROXY,
// ALL_PROXY and their lower-case forms to it (NO_PROXY: localhost,127.0.0.1,::1). What is
// reachable through it is the proxy's to decide; programs that ignore the
// proxy variables reach nothing.
//
// # Limits
//
// A zero Limits field takes its Default* value. After the forwarder starts
// (so it is not bound by them) and before the command, a small wrapper script
// lowers its resource limits with the shell's ulimit builtin; the command and
// everything it starts inherit them:
//
//	CPUSeconds   RLIMIT_CPU per process: SIGXCPU at the limit, SIGKILL a second later
//	MemoryBytes  RLIMIT_AS per process: allocations past it fail (ENOMEM)
//	FileBytes    RLIMIT_FSIZE: a larger write gets SIGXFSZ
//	Processes    a pids cgroup per run (pids.max) when the server can create
//	             one under its own (cgroup v1, or v2 with pids delegated), and
//	             RLIMIT_NPROC, counted per user namespace, so per sandbox.
//	             The kernel never applies RLIMIT_NPROC to root: a server that
//	             runs as root without a writable pids cgroup cannot bound the
//	             processes of a command, and Detect's warning says so. The
//	             sandbox's own processes (bwrap, its init, the forwarder's
//	             threads) count too.
//	OutputBytes  stdout and stderr together; past it the run is killed
//	Wall         the request's timeout, capped at Wall: bwrap is killed, its
//	             init dies with it (--die-with-parent) and the kernel kills
//	             every process of the pid namespace
//
// tool.ExecResult.Limit names the limit that ended a run when that can be
// told: "wall" (TimedOut, Signal "killed"), "output" (Truncated, Signal
// "killed"), "cpu" (SIGXCPU, or SIGKILL after using the CPU limit),
// "file_size" (SIGXFSZ), "processes" (the run failed after its pids cgroup
// refused a fork; only with a cgroup). Running out of address space is not
// told apart: the program sees failed allocations and exits (or crashes) as
// it chooses, so Limit stays empty. Separately, MaxOutputBytes of the request
// bounds what the result keeps of each stream (its beginning and its end).
//
// bwrap reports a command killed by signal n as exit code 128+n, so such a
// code is read as that signal (ExitCode -1, Signal its name); a command that
// itself exits with 129..192 is reported as killed by a signal.
//
// # What a dead server leaves behind
//
// When the server dies, each outer bwrap gets SIGKILL (parent-death
// signal) and the sandbox dies with it (--die-with-parent). One window is
// not covered: bwrap's sandbox process sets its parent-death signal only
// after the outer bwrap has written its uid map, so a server killed in that
// moment leaves a sandbox process waiting forever. NewBwrap (and so Detect)
// kills such orphans at start-up, found by their arguments, and removes the
// per-run pids cgroups (named longhaul-sandbox-PID-RANDOM) of servers that
// are gone.
//
// # What bwrap does not isolate
//
//   - The kernel: there is no seccomp filter; every system call a user
//     namespace allows is open, so a kernel bug is an escape.
//   - Memory is bounded per process by address space, not by resident
//     memory (no memory cgroup); the workspace has no disk quota (FileBytes
//     bounds one file), only /tmp has a size.
//   - When the server runs as root, the sandbox user is root outside the
//     namespace: files of the read-only mounts that only root may read are
//     readable inside (hence the short /etc list). Run the server as an
//     unprivileged user.
//   - Information: /proc shows the machine's kernel, CPUs and memory; the
//     mount table and /proc/1/cmdline (bwrap's own) show the host paths of
//     the workspace and the proxy socket, never their contents.
//   - Sub-agents share their parent's workspace, and so each other's files.
//
// # The local backend
//
// A plain subprocess (`sh -c`) in the workspace at its host path, in a
// process group of its own that is killed when the command ends, times out
// or is cancelled, and that the kernel kills if the server dies (Linux
// Pdeathsig). Its environment is scrubbed to PATH, HOME (the workspace),
// PWD, TMPDIR (a .tmp directory in the workspace), LANG and the request's
// Env. CPU, address-space and file-size limits and the output limit apply as
// above; the process limit does not (RLIMIT_NPROC would count the server's
// own processes). It isolates nothing else: the command runs as the server's
// user, can read and write whatever the server can (its data directory,
// other sessions' workspaces), and reaches every network address the server
// can, its own API port and cloud metadata included; Spec.ProxySocket is
// ignored and no proxy variables are set. That is why bwrap is preferred and
// why Detect warns when it falls back to local.
//
// # Who uses it
//
// Only cmd/longhaul wires it: it calls Detect at start-up, prints the warning
// (and the engine shows it in /readyz details), and hands the Backend to the
// engine, which builds a Spec per session (its workspace from
// internal/workspace, the egress proxy's socket when the agent's
// environment.network allows hosts, Limits from its configuration) and sets
// tool.Call.Exec to Backend.Exec(spec). Tools see only tool.Exec. The hidden
// command `longhaul __sandbox-forward` (cmd/longhaul/forward.go) runs
// RunForwarder. The package imports internal/tool (for the Exec types) and
// the standard library.
package sandbox
