//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// EnterCommand is the hidden subcommand of the longhaul binary through which
// a server that runs as root starts each bwrap sandbox: `longhaul
// __sandbox-enter UID GID N SRC1 ... SRCN -- BWRAP ARGS...`. It is started
// (by this package) in a mount namespace of its own, as root, and:
//
//   - makes every mount of that namespace private, so nothing it does is
//     seen by the host;
//   - mounts a small tmpfs on StageDir and bind-mounts each SRCi (the
//     workspace, the proxy socket, the forwarder binary: paths under the
//     server's data directory, which only root may traverse) on
//     StageDir/i, where the sandbox's user can reach them;
//   - drops to UID:GID with no supplementary groups (for good: real,
//     effective and saved ids), sets its parent-death signal again (a change
//     of credentials clears it), and
//   - executes bwrap, which then runs unprivileged, as UID, and maps its
//     sandbox user to UID: nothing in the sandbox is ever host root.
//
// bwrap resolves the sources of its mounts with the permissions of its
// caller, so a bwrap started as UID could not reach the workspace in place;
// one started as root would map the sandbox user to host root.
const EnterCommand = "__sandbox-enter"

// StageDir is where the enter helper mounts the sources of a sandbox, in its
// private mount namespace (the host's /tmp is left untouched).
const StageDir = "/tmp"

// init runs the enter helper in any binary that links this package (the
// longhaul binary, a test binary, a program embedding the engine) before
// its own main or TestMain: a root server starts sandboxes through
// os.Executable, whatever that program is.
func init() {
	if len(os.Args) > 1 && os.Args[1] == EnterCommand {
		os.Exit(EnterMain(os.Args[2:]))
	}
}

// EnterMain runs EnterCommand with its arguments (after the command name).
// It returns only on failure, with the exit code 125 (as the wrapper script
// uses for a sandbox that could not be set up).
func EnterMain(args []string) int {
	err := enter(args)
	fmt.Fprintf(os.Stderr, "longhaul sandbox: %v\n", err)
	return 125
}

func enter(args []string) error {
	if len(args) < 3 {
		return errors.New(EnterCommand + ": usage: UID GID N SRC... -- COMMAND...")
	}
	uid, err1 := strconv.Atoi(args[0])
	gid, err2 := strconv.Atoi(args[1])
	n, err3 := strconv.Atoi(args[2])
	if err := errors.Join(err1, err2, err3); err != nil || uid <= 0 || gid <= 0 || n < 0 || len(args) < 3+n+2 {
		return errors.New(EnterCommand + ": bad arguments")
	}
	srcs := args[3 : 3+n]
	if args[3+n] != "--" {
		return errors.New(EnterCommand + ": bad arguments: no -- before the command")
	}
	argv := args[4+n:]
	parent := os.Getppid()

	// Sources are opened before the stage hides anything under it.
	fds := make([]int, len(srcs))
	for i, src := range srcs {
		fd, err := unix.Open(src, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", src, err)
		}
		fds[i] = fd
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", StageDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0711,size=64k"); err != nil {
		return fmt.Errorf("mount the stage: %w", err)
	}
	for i, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("stat %s: %w", srcs[i], err)
		}
		target := filepath.Join(StageDir, strconv.Itoa(i))
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			err := os.Mkdir(target, 0o700)
			if err != nil {
				return err
			}
		} else if err := os.WriteFile(target, nil, 0o600); err != nil {
			return err
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("stage %s: %w", srcs[i], err)
		}
	}
	if err := unix.Setgroups(nil); err != nil {
		return fmt.Errorf("drop supplementary groups: %w", err)
	}
	if err := unix.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("set gid %d: %w", gid, err)
	}
	if err := unix.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("set uid %d: %w", uid, err)
	}
	if os.Geteuid() == 0 || os.Getuid() == 0 {
		return errors.New("still root after dropping privileges")
	}
	// The change of credentials cleared the parent-death signal: set it
	// again, and give up if the server is already gone.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("set the parent-death signal: %w", err)
	}
	if os.Getppid() != parent {
		return errors.New("the server is gone")
	}
	return syscall.Exec(argv[0], argv, os.Environ())
}
