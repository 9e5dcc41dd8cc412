//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// ReapCommand is the hidden subcommand of the longhaul binary that stands
// between the server (or runner) and each command of the local backend:
// `longhaul __sandbox-reap PARENT NFILES -- COMMAND...`. The local backend
// has no pid namespace whose end kills everything in it (bwrap's), and a
// parent-death signal binds only the process it is set on: a command's
// background grandchild (`sh -c 'sleep 1000 &'`) or a daemon that called
// setsid would outlive a server killed with SIGKILL. So the reaper:
//
//   - makes itself a child subreaper (PR_SET_CHILD_SUBREAPER): whatever
//     the command starts stays its descendant, however it detaches (an
//     orphan is given to the nearest subreaper, not to init);
//   - gets SIGTERM, not SIGKILL, as its parent-death signal, so it
//     outlives its parent by the time it takes to kill every descendant;
//     the server sends it SIGTERM too, to cancel;
//   - runs COMMAND with the standard streams and fds 3..3+NFILES-1 it got,
//     and when COMMAND ends (or on SIGTERM) kills every process left under
//     it, waits until none is, and exits the way COMMAND did (its exit
//     code, or the signal that killed it), so the server reads the
//     command's status from the reaper's.
//
// What it does not survive: SIGKILL sent to the reaper itself (by the
// same user: the local backend isolates nothing); its command then still
// gets SIGKILL (its own parent-death signal), the rest of its process
// group with the server's kill of the group.
const ReapCommand = "__sandbox-reap"

// reapPoll is how often a reaper looks again for descendants while it
// kills them (the kernel tells it of a death only when the dead process
// is its child).
const reapPoll = 5 * time.Millisecond

func init() {
	if len(os.Args) > 1 && os.Args[1] == ReapCommand {
		os.Exit(ReapMain(os.Args[2:]))
	}
	// The shell tool's plain commands (no sandbox: tests, embedding) run
	// under the same reaper, since this binary answers ReapCommand.
	tool.SetReaper(plainReaper)
}

// plainReaper is the tool.Reaper of the shell tool's plain commands: argv
// under ReapCommand of this binary, nil when it cannot be found.
func plainReaper(argv []string) []string {
	path := reaperPath()
	if path == "" {
		return nil
	}
	wrapped, _ := underReaper(path, argv, 0, false)
	return wrapped
}

// ReapMain runs ReapCommand with its arguments (after the command name) and
// returns the exit code (or dies of the command's signal).
func ReapMain(args []string) int {
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "longhaul sandbox: "+ReapCommand+": usage: PARENT NFILES -- COMMAND...")
		return 125
	}
	parent, err1 := strconv.Atoi(args[0])
	nfiles, err2 := strconv.Atoi(args[1])
	if err := errors.Join(err1, err2); err != nil || parent <= 0 || nfiles < 0 || nfiles > 64 {
		fmt.Fprintln(os.Stderr, "longhaul sandbox: "+ReapCommand+": bad arguments")
		return 125
	}
	status, err := reap(parent, nfiles, args[3:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "longhaul sandbox: %v\n", err)
		return 125
	}
	return exitLike(status)
}

func reap(parent, nfiles int, argv []string) (unix.WaitStatus, error) {
	// The command's own parent-death signal is tied to this thread.
	runtime.LockOSThread()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("become a subreaper: %w", err)
	}
	// The parent-death signal (set by the parent) may have come before
	// SIGTERM was caught, and killed us; or the parent died before it was
	// set: then nothing is started.
	if os.Getppid() != parent {
		return 0, errors.New("the server is gone")
	}
	path := argv[0]
	files := make([]uintptr, 3+nfiles)
	for i := range files {
		files[i] = uintptr(i)
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: files,
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", path, err)
	}
	// The command holds its own copies: ours of the extra fds would keep
	// the server's readers from their EOF (the status pipe) for as long as
	// the reaper lives.
	for fd := 3; fd < 3+nfiles; fd++ {
		_ = unix.Close(fd)
	}

	var (
		status unix.WaitStatus
		ended  bool // the command was reaped
		tick   <-chan time.Time
	)
	for {
		// Reap whatever has ended: the command, or an orphan given to us.
		for {
			var ws unix.WaitStatus
			got, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.ECHILD) {
				return status, nil // nothing left under us
			}
			if err != nil || got <= 0 {
				break
			}
			if got == pid {
				status, ended = ws, true
			}
		}
		if ended && tick == nil {
			// The command is over: what it left goes with it.
			killDescendants()
			tick = time.Tick(reapPoll)
		}
		select {
		case <-chld:
		case <-term:
			killDescendants()
			if tick == nil {
				tick = time.Tick(reapPoll)
			}
		case <-tick:
			killDescendants()
		}
	}
}

// killDescendants sends SIGKILL to every process under this one, found by
// their parents in /proc. A process started after the scan has a parent
// that the scan found and killed: it is an orphan of ours by the next one.
func killDescendants() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid := statPPID(pid); ppid > 0 {
			children[ppid] = append(children[ppid], pid)
		}
	}
	todo := []int{os.Getpid()}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, c := range children[p] {
			_ = unix.Kill(c, unix.SIGKILL)
			todo = append(todo, c)
		}
	}
}

// statPPID reads the parent of pid from /proc/pid/stat (after the command
// name, which may hold spaces and parentheses).
func statPPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// exitLike ends the reaper as the command ended: with its exit code, or by
// the signal that killed it (its default action restored first, and no
// core file: the command's dump, if any, was its own).
func exitLike(ws unix.WaitStatus) int {
	if !ws.Signaled() {
		return ws.ExitStatus()
	}
	sig := ws.Signal()
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	signal.Reset(sig)
	setDefaultAction(sig)
	_ = unix.Kill(os.Getpid(), sig)
	// A signal whose default is to be ignored (or that did not kill):
	// the shell's way of saying it.
	time.Sleep(100 * time.Millisecond)
	return 128 + int(sig)
}

// setDefaultAction restores sig's default action behind the Go runtime,
// which ignores SIGXCPU and SIGXFSZ and handles the others itself. A
// zeroed sigaction is SIG_DFL with no flags on every architecture.
func setDefaultAction(sig syscall.Signal) {
	var act [4]uint64
	_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
}

// reaperPath is the binary that runs ReapCommand: this one ("" when it
// cannot be found; commands then run without a reaper). /proc/self/exe,
// resolved by the process that execs it (this one, forked), is this very
// binary even once its file was replaced by an upgrade (a reaper of
// another version would not speak this one's arguments) or deleted.
var reaperPath = sync.OnceValue(func() string {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe"
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return exe
})

// wakeOrphanedReapers finishes what reapers of a dead server or runner
// left undone: a reaper whose parent is not the one its arguments name
// any more (its server died) and that still runs was stopped (SIGSTOP, by
// its own command) before it could act on its parent-death signal. It
// gets SIGCONT and SIGTERM, and then kills every process under it. Run
// once when a local backend is made (a restarted runner or server). It
// returns how many it woke.
func wakeOrphanedReapers() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	ownNS, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return 0
	}
	woken := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		args := cmdline(pid)
		if len(args) < 3 || args[1] != ReapCommand {
			continue
		}
		// Its PARENT is a pid of its own namespace: one of another (a
		// runner in a container) cannot be told apart from an orphan.
		if ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid"); err != nil || ns != ownNS {
			continue
		}
		ppid := parentPid(pid)
		if !orphanedReaper(args, ppid, cmdline(ppid)) {
			continue
		}
		_ = unix.Kill(pid, unix.SIGCONT)
		if unix.Kill(pid, unix.SIGTERM) == nil {
			woken++
		}
	}
	return woken
}

// orphanedReaper reports whether a process running args (a reaper's:
// ReapCommand PARENT ...), whose parent is ppid running parentArgs, is a
// reaper whose server is gone: its parent is not the one its arguments
// name. Not so a reaper's command between its fork and its exec: it still
// shows the reaper's arguments, under the reaper. A SIGTERM there (from
// any server of the machine starting its first local backend) would kill
// the command before it started, its server reading a sandbox failure
// ("local exec: exit status -1") where the command never ran.
func orphanedReaper(args []string, ppid int, parentArgs []string) bool {
	parent, err := strconv.Atoi(args[2])
	if err != nil || ppid <= 0 || ppid == parent {
		return false // unreadable, gone (no parent to read), or its server's
	}
	return !slices.Equal(parentArgs, args)
}

// reaperAttr starts a reaper in a process group of its own (so the group
// is still killed as one when the reaper cannot do its job) with SIGTERM as
// its parent-death signal: it outlives the server by the time it takes to
// kill what its command left.
func reaperAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// signalRun starts the end of the run whose first process is pid: with a
// reaper, SIGTERM to it (it kills every process under it and exits);
// without one, SIGKILL to the process group.
func signalRun(pid int, reaped bool) error {
	if !reaped {
		return killGroup(pid)
	}
	if err := unix.Kill(pid, unix.SIGTERM); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// terminate ends the run whose first process is pid: signalRun, then, with
// a reaper, a wait of up to grace for done; the group is killed in any
// case after that (a reaper stopped or killed by its own command, which
// runs as the same user, cannot do its job).
func terminate(pid int, reaped bool, done <-chan struct{}, grace time.Duration) {
	if reaped && signalRun(pid, true) == nil {
		t := time.NewTimer(grace)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	_ = killGroup(pid)
}
