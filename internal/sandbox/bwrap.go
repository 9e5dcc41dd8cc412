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
}

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
	for _, need := range []string{"--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--ro-bind-data", "--remount-ro", "--cap-drop"} {
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

// warning says what this backend cannot enforce here, or "".
func (b *bwrapBackend) warning() string {
	if b.cgroup == "" && os.Geteuid() == 0 {
		return "sandbox: bwrap cannot limit the number of processes of a command: the server runs as root, " +
			"for which the kernel does not enforce RLIMIT_NPROC, and no pids cgroup could be created (" +
			b.cgroupErr.Error() + "); a fork bomb is stopped only by the wall time limit. " +
			"Run the server as an unprivileged user, or give it a writable pids cgroup."
	}
	return ""
}

func (b *bwrapBackend) Name() string { return "bwrap" }

func (b *bwrapBackend) Exec(spec Spec) tool.Exec { return &bwrapExec{b: b, spec: spec} }

type bwrapExec struct {
	b    *bwrapBackend
	spec Spec
}

// Run implements tool.Exec.
func (e *bwrapExec) Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error) {
	lim, err := e.spec.validate()
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
	argv, files, cg := prep.argv, prep.files, prep.cg

	out, err := runProcess(ctx, &runSpec{
		argv:        argv,
		env:         []string{"PATH=" + DefaultPath},
		dir:         "/",
		files:       files,
		timeout:     timeout,
		maxCapture:  maxOut,
		outputLimit: lim.OutputBytes,
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
	if !out.started && !out.timedOut && !out.cancelled && !out.outputLimited {
		return nil, fmt.Errorf("sandbox exec: set up sandbox: %w", setupError(out))
	}
	return toResult(out, lim, true, hit), nil
}

// prepared is a sandbox ready to start: its command line, the files it
// reads its generated /etc entries from, and its pids cgroup (nil: none).
type prepared struct {
	argv  []string
	files []*os.File
	cg    *runCgroup
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
	p := &prepared{}
	// fds 4, 5, 6 (fd 3 is the status pipe).
	for _, data := range []string{passwdData, groupData, hostsData} {
		f, err := dataFile(data)
		if err != nil {
			p.closeFiles()
			return nil, err
		}
		p.files = append(p.files, f)
	}
	argv := append([]string{b.path}, b.args(spec, lim, env)...)
	argv = append(argv, "--", "/bin/sh", "-c", wrapperScript)
	argv = append(argv, wrapperArgs(command, lim, true, forwarder)...)
	if b.cgroup != "" {
		cg, err := newRunCgroup(b.cgroup, lim.Processes)
		if err != nil {
			p.closeFiles()
			return nil, err
		}
		// The shell joins the cgroup, then becomes bwrap: every process
		// of the sandbox is born in it, with no window before.
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
	lim, err := spec.validate()
	if err != nil {
		return nil, fmt.Errorf("sandbox start: %w", err)
	}
	if err := req.check(); err != nil {
		return nil, fmt.Errorf("sandbox start: %w", err)
	}
	prep, err := b.prepare(&spec, lim, req.Command, req.Env)
	if err != nil {
		return nil, fmt.Errorf("sandbox start: %w", err)
	}
	defer prep.closeFiles()
	var cleanup func()
	if cg := prep.cg; cg != nil {
		cleanup = func() { _ = cg.remove() }
	}
	p, err := startProcess(ctx, &startSpec{
		argv:      prep.argv,
		env:       []string{"PATH=" + DefaultPath},
		dir:       "/",
		files:     prep.files,
		maxStderr: cmp.Or(req.MaxStderrBytes, DefaultMaxOutputBytes),
		cleanup:   cleanup,
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox start: set up sandbox: %w", err)
	}
	return p, nil
}

// args returns bwrap's options for spec (without the command).
func (b *bwrapBackend) args(spec *Spec, lim Limits, env map[string]string) []string {
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
		"--proc", "/proc",
		"--dev", "/dev",
	)
	if b.sizeTmp {
		a = append(a, "--size", strconv.FormatInt(lim.TmpBytes, 10))
	}
	a = append(a, "--tmpfs", "/tmp",
		"--bind", spec.Workspace, WorkspaceDir,
	)
	if spec.ProxySocket != "" {
		a = append(a,
			"--ro-bind", spec.ProxySocket, ProxySocketPath,
			"--ro-bind", b.forwarder, ForwarderPath,
		)
	}
	a = append(a, "--chdir", WorkspaceDir, "--remount-ro", "/")
	return a
}
