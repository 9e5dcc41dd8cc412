package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// BwrapOptions configures the bwrap backend. The zero value finds everything
// itself.
type BwrapOptions struct {
	// Path is the bwrap binary (default: "bwrap" looked up in PATH).
	Path string
	// Forwarder is the program run in the sandbox as `Forwarder
	// __sandbox-forward --listen ... --socket ...` when a Spec has a
	// ProxySocket (default: os.Executable(), the longhaul binary). It is
	// mounted read-only at ForwarderPath. A test binary is the default in
	// tests: its TestMain must hand ForwardCommand to ForwardMain.
	Forwarder string
	// NoCgroup turns off the per-run pids cgroup, leaving the process
	// limit to RLIMIT_NPROC alone.
	NoCgroup bool
	// UID and GID are the host user and group the sandbox's processes run
	// as when the server runs as root (default 65534 and 65534: nobody and
	// nogroup). A dedicated, otherwise unused pair is better: every
	// sandbox, of every session, runs as it. The server then starts each
	// sandbox through the Forwarder binary's EnterCommand and gives the
	// workspace to this user before each command. A server that does not
	// run as root runs its sandboxes as its own user and ignores them.
	UID, GID int
	// DiskBytes is the workspace quota of a Spec that sets none (0:
	// DefaultDiskBytes).
	DiskBytes int64
	// ReadOnlyPaths are host directories (or files) every sandbox sees
	// read-only at the same place (serve --sandbox-ro-path), checked by
	// CheckReadOnlyPaths. With a root server the sandbox's user must be
	// able to read them.
	ReadOnlyPaths []string
}

// Default host identity of the sandboxes of a root server.
const (
	DefaultUID = 65534
	DefaultGID = 65534
)

// Sandbox identity: the user commands run as, inside the user namespace.
// Whatever the server's user, files it owns appear owned by this user.
const (
	sandboxUID  = 1000
	sandboxUser = "sandbox"
	hostname    = "longhaul"
)

// systemDirs are mounted read-only at the same place when they are
// directories, or recreated when they are symlinks (merged /usr).
var systemDirs = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcEntries are the only files of /etc a sandbox sees, read-only: what
// dynamic linking, TLS certificate checks, time zones, alternatives
// (/usr/bin/awk is a link into /etc/alternatives) and common interpreters
// need. Nothing with host secrets: /etc/ssl/private, /etc/shadow, machine
// ids and the server's own configuration stay out. passwd, group and hosts
// are generated.
var etcEntries = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf",
	"crypto-policies", "gai.conf", "host.conf", "inputrc", "ld.so.cache", "ld.so.conf",
	"ld.so.conf.d", "localtime", "mime.types", "nsswitch.conf", "os-release",
	"perl", "pki/ca-trust", "pki/tls/certs", "profile", "protocols", "python3",
	"services", "shells", "ssl/certs", "ssl/openssl.cnf", "timezone",
}

const (
	passwdData = sandboxUser + ":x:1000:1000:longhaul sandbox:" + WorkspaceDir + ":/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	groupData = sandboxUser + ":x:1000:\nnogroup:x:65534:\n"
	hostsData = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n"
)

// probeTimeout bounds the trivial sandbox run by NewBwrap.
const probeTimeout = 20 * time.Second

type bwrapBackend struct {
	path      string
	forwarder string
	// cgroup is the parent of the per-run pids cgroups ("" for none);
	// cgroupErr says why there is none.
	cgroup    string
	cgroupErr error
	// disableUserns is true when bwrap has --disable-userns, sizeTmp when
	// it has --size.
	disableUserns bool
	sizeTmp       bool
	// root is true when the server runs as root: each sandbox is then
	// started through the enter helper and runs as owner (see
	// EnterCommand).
	root  bool
	owner ids
	// seccomp is the compiled filter bwrap loads (seccompProgram).
	seccomp []byte
	// disk is the default workspace quota (0: DefaultDiskBytes).
	disk int64
	// roPaths are BwrapOptions.ReadOnlyPaths, checked: where the sandbox
	// sees them; roReal, where their symlinks led when checked (what is
	// mounted, as long as they still lead there).
	roPaths, roReal []string
}

// NewBwrap returns the bwrap backend after running a trivial sandbox once.
// It fails when bwrap is missing, too old, or cannot create the namespaces it
// needs on this machine (user namespaces disabled, a container without the
// privileges). It first kills the sandboxes a dead server left behind (see
// the package documentation).
func NewBwrap(opts BwrapOptions) (Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	b, err := newBwrap(ctx, opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func newBwrap(ctx context.Context, opts BwrapOptions) (*bwrapBackend, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("bwrap needs Linux, not %s", runtime.GOOS)
	}
	path := opts.Path
	if path == "" {
		path = "bwrap"
	}
	path, err := exec.LookPath(path)
	if err != nil {
		return nil, fmt.Errorf("bubblewrap (bwrap) is not installed: %w", err)
	}
	help, err := exec.CommandContext(ctx, path, "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("run %s --help: %w", path, err)
	}
	for _, need := range []string{"--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--ro-bind-data", "--remount-ro", "--cap-drop", "--seccomp"} {
		if !strings.Contains(string(help), need) {
			return nil, fmt.Errorf("%s is too old: it has no %s option", path, need)
		}
	}
	b := &bwrapBackend{
		path:          path,
		forwarder:     opts.Forwarder,
		disableUserns: strings.Contains(string(help), "--disable-userns"),
		sizeTmp:       strings.Contains(string(help), "--size"),
	}
	if b.forwarder == "" {
		if exe, err := os.Executable(); err == nil {
			b.forwarder = exe
		}
	}
	if b.seccomp, _, err = seccompProgram(); err != nil {
		return nil, err
	}
	b.disk = max(opts.DiskBytes, 0)
	if b.roPaths, err = CheckReadOnlyPaths("read-only path", opts.ReadOnlyPaths); err != nil {
		return nil, err
	}
	for _, p := range b.roPaths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("read-only path %s: %w", p, err)
		}
		b.roReal = append(b.roReal, real)
	}
	if os.Geteuid() == 0 {
		b.root = true
		b.owner = ids{uid: cmp.Or(opts.UID, DefaultUID), gid: cmp.Or(opts.GID, DefaultGID)}
		if b.owner.uid <= 0 || b.owner.gid <= 0 {
			return nil, fmt.Errorf("the sandbox's user and group must not be root (uid %d, gid %d)", b.owner.uid, b.owner.gid)
		}
		if b.forwarder == "" {
			return nil, errors.New("a server that runs as root needs the longhaul binary (BwrapOptions.Forwarder) to start sandboxes as an unprivileged user")
		}
	}
	// What a server that died left behind goes first.
	reapOrphans()
	if opts.NoCgroup {
		b.cgroupErr = errors.New("turned off")
	} else if b.cgroup, b.cgroupErr = findPidsCgroup(); b.cgroupErr == nil {
		removeStaleCgroups(b.cgroup)
	}

	probeErr := b.probe(ctx)
	if probeErr != nil && b.cgroup != "" {
		// The cgroup may be what fails; a sandbox without one still
		// isolates, with a weaker process limit.
		cg := b.cgroup
		b.cgroup = ""
		if b.probe(ctx) == nil {
			b.cgroupErr = fmt.Errorf("a sandbox in a pids cgroup under %s does not start: %w", cg, probeErr)
			probeErr = nil
		}
	}
	if probeErr != nil {
		return nil, fmt.Errorf("bubblewrap cannot create a sandbox here: %w", probeErr)
	}
	return b, nil
}

// probe runs `true` in a sandbox on an empty workspace.
func (b *bwrapBackend) probe(ctx context.Context) error {
	ws, err := os.MkdirTemp("", "longhaul-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	res, err := b.Exec(Spec{SessionID: "probe", Workspace: ws}).Run(ctx, &tool.ExecRequest{Command: "true", Timeout: probeTimeout})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("exit code %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return nil
}

// warning says what this backend cannot enforce here, or "". Sandboxes
// never run as root (see EnterCommand), so RLIMIT_NPROC always binds them:
// there is nothing to say.
func (b *bwrapBackend) warning() string {
	return ""
}

func (b *bwrapBackend) Name() string { return "bwrap" }

func (b *bwrapBackend) ConfinesNetwork() bool { return true }

func (b *bwrapBackend) Exec(spec Spec) tool.Exec { return &bwrapExec{b: b, spec: spec} }

type bwrapExec struct {
	b    *bwrapBackend
	spec Spec
}

// Run implements tool.Exec.
func (e *bwrapExec) Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error) {
	lim, err := e.spec.validate(e.b.disk)
	if err != nil {
		return nil, fmt.Errorf("sandbox exec: %w", err)
	}
	timeout, maxOut, err := checkRequest(req, lim)
	if err != nil {
		return nil, fmt.Errorf("sandbox exec: %w", err)
	}
	prep, err := e.b.prepare(&e.spec, lim, req.Command, req.Env)
	if err != nil {
		return nil, fmt.Errorf("sandbox exec: %w", err)
	}
	defer prep.closeFiles()
	argv, files, cg, before := prep.argv, prep.files, prep.cg, prep.usage

	out, err := runProcess(ctx, &runSpec{
		argv:        argv,
		env:         []string{"PATH=" + DefaultPath},
		dir:         "/",
		files:       files,
		timeout:     timeout,
		maxCapture:  maxOut,
		outputLimit: lim.OutputBytes,
		newMountNS:  e.b.root,
		monitor:     diskMonitor(measureWorkspace, e.spec.Workspace, e.b.sandboxOwner(), lim.DiskBytes, before),
	})
	hit := false
	if cg != nil {
		hit = cg.hitMax()
		if rerr := cg.remove(); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox exec: %w", err)
	}
	if !out.started && !out.timedOut && !out.cancelled && !out.outputLimited && out.stopErr == nil {
		return nil, fmt.Errorf("sandbox exec: set up sandbox: %w", setupError(out))
	}
	res := toResult(out, lim, true, hit)
	applyQuota(measureWorkspace, res, out, e.spec.Workspace, e.b.sandboxOwner(), lim.DiskBytes, before)
	return res, nil
}

// sandboxOwner is who a root server gives the workspace's files to at
// every measure (nil: the server is not root, its files are the sandbox's).
func (b *bwrapBackend) sandboxOwner() *ids {
	if b.root {
		return &b.owner
	}
	return nil
}

// prepared is a sandbox ready to start: its command line, the files it
// reads its generated /etc entries and its seccomp filter from, and its pids
// cgroup (nil: none).
type prepared struct {
	argv  []string
	files []*os.File
	cg    *runCgroup
	// usage is the workspace's usage before the command.
	usage int64
}

// sources are the host paths a sandbox mounts: as they are, or, for a root
// server, as staged by the enter helper.
type sources struct {
	workspace, socket, forwarder string
	// roPaths are the sources of the backend's read-only paths, in order.
	roPaths []string
}

func (p *prepared) closeFiles() {
	for _, f := range p.files {
		f.Close()
	}
}

// prepare checks spec's workspace and proxy socket and builds the command
// line of a sandbox running command, with its pids cgroup when the backend
// has one. The caller closes the files, and removes the cgroup when the
// sandbox is gone.
func (b *bwrapBackend) prepare(spec *Spec, lim Limits, command string, env map[string]string) (*prepared, error) {
	if err := checkWorkspace(spec.Workspace); err != nil {
		return nil, err
	}
	forwarder := ""
	if spec.ProxySocket != "" {
		fi, err := os.Stat(spec.ProxySocket)
		if err != nil {
			return nil, fmt.Errorf("spec.proxy_socket: %w", err)
		}
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("spec.proxy_socket: %s is not a socket", spec.ProxySocket)
		}
		if b.forwarder == "" {
			return nil, errors.New("no forwarder binary for the proxy (BwrapOptions.Forwarder)")
		}
		forwarder = ForwarderPath
	}
	ro, err := b.roSources()
	if err != nil {
		return nil, err
	}
	src := sources{workspace: spec.Workspace, socket: spec.ProxySocket, forwarder: b.forwarder, roPaths: ro}
	var staged []string
	// The sandbox's user must own what it writes (a root server gives it
	// what the engine wrote), and the quota needs the usage before.
	usage := usageBefore(spec.Workspace, b.sandboxOwner())
	if b.root {
		// The sandbox's user must reach the proxy's socket (a connect
		// needs write permission on it).
		stage := func(p string) string {
			staged = append(staged, p)
			return filepath.Join(StageDir, strconv.Itoa(len(staged)-1))
		}
		src.workspace = stage(spec.Workspace)
		if spec.ProxySocket != "" {
			if err := os.Lchown(spec.ProxySocket, b.owner.uid, b.owner.gid); err != nil {
				return nil, fmt.Errorf("spec.proxy_socket: %w", err)
			}
			src.socket = stage(spec.ProxySocket)
			src.forwarder = stage(b.forwarder)
		}
		// The read-only paths too: the sandbox's user may not be able to
		// reach them where they are (under /root, say), and the helper's
		// stage hides the host's /tmp.
		for i, p := range ro {
			src.roPaths[i] = stage(p)
		}
	}
	p := &prepared{usage: usage}
	// fds 4, 5, 6, 7 (fd 3 is the status pipe).
	for _, data := range []string{passwdData, groupData, hostsData, string(b.seccomp)} {
		f, err := dataFile(data)
		if err != nil {
			p.closeFiles()
			return nil, err
		}
		p.files = append(p.files, f)
	}
	argv := append([]string{b.path}, b.args(spec, src, lim, env)...)
	argv = append(argv, "--", "/bin/sh", "-c", wrapperScript)
	argv = append(argv, wrapperArgs(command, lim, true, forwarder)...)
	if b.root {
		head := []string{b.forwarder, EnterCommand, strconv.Itoa(b.owner.uid), strconv.Itoa(b.owner.gid), strconv.Itoa(len(staged))}
		head = append(head, staged...)
		argv = append(append(head, "--"), argv...)
	}
	if b.cgroup != "" {
		cg, err := newRunCgroup(b.cgroup, lim.Processes)
		if err != nil {
			p.closeFiles()
			return nil, err
		}
		// The shell joins the cgroup, then becomes bwrap (or the enter
		// helper, which becomes bwrap): every process of the sandbox is
		// born in it, with no window before.
		argv = append([]string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, cg.procs()}, argv...)
		p.cg = cg
	}
	p.argv = argv
	return p, nil
}

// Start implements Backend: the program runs in a sandbox of its own, set
// up as for Exec (mounts, user, network through the proxy, limits), for as
// long as it lives.
func (b *bwrapBackend) Start(ctx context.Context, spec Spec, req *StartRequest) (*Process, error) {
	lim, err := spec.validate(b.disk)
	if err != nil {
		return nil, fmt.Errorf("sandbox start: %w", err)
	}
	if err := req.check(); err != nil {
		return nil, fmt.Errorf("sandbox start: %w", err)
	}
	if req.UnboundedAddressSpace {
		lim.MemoryBytes = -1
	}
	if err := b.checkProgram(req.Program); err != nil {
		return nil, fmt.Errorf("sandbox start: %w", err)
	}
	prep, err := b.prepare(&spec, lim, req.Command, req.Env)
	if err != nil {
		return nil, fmt.Errorf("sandbox start: %w", err)
	}
	defer prep.closeFiles()
	argv, mem := startBounded(prep.argv, req)
	cleanup := func() {
		if prep.cg != nil {
			_ = prep.cg.remove()
		}
		if mem != nil {
			_ = mem.remove()
		}
	}
	p, err := startProcess(ctx, &startSpec{
		memory:     mem,
		argv:       argv,
		env:        []string{"PATH=" + DefaultPath},
		dir:        "/",
		files:      prep.files,
		maxStderr:  cmp.Or(req.MaxStderrBytes, DefaultMaxOutputBytes),
		cleanup:    cleanup,
		newMountNS: b.root,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox start: set up sandbox: %w", err)
	}
	return p, nil
}

// args returns bwrap's options for spec (without the command), mounting
// src.
func (b *bwrapBackend) args(spec *Spec, src sources, lim Limits, env map[string]string) []string {
	a := []string{
		"--unshare-all", "--unshare-user",
	}
	if b.disableUserns {
		a = append(a, "--disable-userns")
	}
	a = append(a,
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxUID),
		"--hostname", hostname,
		"--clearenv",
	)
	base := map[string]string{
		"PATH":    DefaultPath,
		"HOME":    WorkspaceDir,
		"TMPDIR":  "/tmp",
		"LANG":    "C.UTF-8",
		"USER":    sandboxUser,
		"LOGNAME": sandboxUser,
	}
	vars := map[string]string{}
	for k, v := range base {
		vars[k] = v
	}
	for k, v := range env {
		vars[k] = v
	}
	if spec.ProxySocket != "" {
		// Set last: a request cannot point them elsewhere.
		proxy := "http://" + ProxyListen
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
			vars[k] = proxy
		}
		for _, k := range []string{"NO_PROXY", "no_proxy"} {
			vars[k] = "localhost,127.0.0.1,::1"
		}
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a = append(a, "--setenv", k, vars[k])
	}

	a = append(a, "--ro-bind", "/usr", "/usr")
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode().Type() == fs.ModeSymlink:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, e := range etcEntries {
		p := filepath.Join("/etc", e)
		if _, err := os.Stat(p); err == nil {
			a = append(a, "--ro-bind", p, p)
		}
	}
	a = append(a,
		"--ro-bind-data", "4", "/etc/passwd",
		"--ro-bind-data", "5", "/etc/group",
		"--ro-bind-data", "6", "/etc/hosts",
		"--seccomp", "7",
		"--proc", "/proc",
	)
	a = append(a, procMasks()...)
	a = append(a, "--dev", "/dev")
	a = append(a, b.sizedTmpfs(lim.ShmBytes, "/dev/shm")...)
	a = append(a, b.sizedTmpfs(lim.TmpBytes, "/tmp")...)
	a = append(a, "--bind", src.workspace, WorkspaceDir)
	if spec.ProxySocket != "" {
		a = append(a,
			"--ro-bind", src.socket, ProxySocketPath,
			"--ro-bind", src.forwarder, ForwarderPath,
		)
	}
	// Last, so that one under /tmp lands on the sandbox's own /tmp.
	for i, p := range b.roPaths {
		a = append(a, "--ro-bind", src.roPaths[i], p)
	}
	// The root and /dev are tmpfs that bwrap made, owned by the sandbox's
	// user: read-only, only /workspace, /tmp and /dev/shm stay writable.
	a = append(a, "--chdir", WorkspaceDir, "--remount-ro", "/dev", "--remount-ro", "/")
	return a
}

// sizedTmpfs mounts a tmpfs of size bytes on dir, or, with a bwrap that
// cannot size one, an empty read-only one (an unbounded tmpfs would let a
// command fill the machine's memory).
func (b *bwrapBackend) sizedTmpfs(size int64, dir string) []string {
	if b.sizeTmp {
		return []string{"--size", strconv.FormatInt(size, 10), "--tmpfs", dir}
	}
	return []string{"--tmpfs", dir, "--remount-ro", dir}
}

// What of /proc a sandbox may not write or see, as container runtimes mask
// it (runc's and moby's default masked and read-only paths): the kernel's
// settings and its triggers read-only; its memory, its log, its keys and
// its timers hidden. Paths this kernel does not have are skipped.
var (
	procReadOnly    = []string{"/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"}
	procMaskedFiles = []string{
		"/proc/sysrq-trigger", "/proc/kcore", "/proc/kmsg", "/proc/keys", "/proc/key-users",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/interrupts", "/proc/kallsyms", "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup",
		"/proc/config.gz", "/proc/vmallocinfo", "/proc/slabinfo", "/proc/modules",
	}
	procMaskedDirs = []string{"/proc/acpi", "/proc/asound", "/proc/scsi", "/proc/driver", "/proc/tty/driver"}
)

// procMasks returns bwrap's options that apply procReadOnly,
// procMaskedFiles and procMaskedDirs over the sandbox's new /proc.
func procMasks() []string {
	var a []string
	for _, p := range procReadOnly {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			a = append(a, "--ro-bind", p, p)
		}
	}
	for _, p := range procMaskedFiles {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			a = append(a, "--ro-bind", "/dev/null", p)
		}
	}
	for _, p := range procMaskedDirs {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			a = append(a, "--tmpfs", p, "--remount-ro", p)
		}
	}
	return a
}
