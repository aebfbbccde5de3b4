// Package proctest runs Mnemos as real child processes, for tests that kill
// and restart them: it builds the mnemos binary and a nats-server once per
// test binary (Main, as TestMain), starts any target against a test's
// Postgres and NATS, kills it with SIGKILL or stops it with SIGTERM, starts
// it again, waits for it to exit on its own (a crash hook of pkg/faults), and
// reads its Prometheus metrics.
package proctest

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Binaries are the programs Build made.
type Binaries struct {
	Mnemos     string
	NATSServer string
}

// Build compiles the mnemos binary and a nats-server (from the
// github.com/nats-io/nats-server/v2 module the repository requires) into dir.
// Main calls it once per test binary: the build cache makes later runs quick.
func Build(dir string) (Binaries, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return Binaries{}, fmt.Errorf("proctest.Build: the go command is needed to build the binaries: %w", err)
	}
	bins := Binaries{Mnemos: filepath.Join(dir, "mnemos"), NATSServer: filepath.Join(dir, "nats-server")}
	for out, pkg := range map[string]string{
		bins.Mnemos:     "github.com/mnemos-ai/mnemos/cmd/mnemos",
		bins.NATSServer: "github.com/nats-io/nats-server/v2",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		msg, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			return Binaries{}, fmt.Errorf("proctest.Build: go build %s: %w\n%s", pkg, err, msg)
		}
	}
	return bins, nil
}

// Main is the TestMain of a package whose tests run Mnemos as processes: it
// builds the binaries (Build) into a temporary directory, sets *bins, runs
// the tests, removes the directory and exits with the tests' code. When the
// build fails it prints why and exits 1 without running any test. Under
// -short (make test-fast) it runs none, builds nothing and says so: make
// test runs them.
//
//	var bins proctest.Binaries
//
//	func TestMain(m *testing.M) { proctest.Main(m, &bins) }
func Main(m *testing.M, bins *Binaries) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("SKIP: -short: these tests run Mnemos as processes; make test runs them")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "mnemos-proctest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bins, err = Build(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Process is a child process that can be killed and started again with the
// same command line and environment.
type Process struct {
	name  string
	bin   string
	args  []string
	env   []string
	ready func(context.Context, *Process) error
	t     testing.TB

	mu     sync.Mutex
	cmd    *exec.Cmd
	addr   string        // the HTTP address the process printed, if any
	admin  string        // the operator listener's address it printed, if any
	exited chan struct{} // closed when the current run ended
	code   int           // its exit code (-1: killed by a signal)
	runs   int
}

// readyTimeout bounds how long a process may take to become ready; a busy
// machine starting several at once is slow.
const readyTimeout = 2 * time.Minute

// cleanEnv is what a child inherits of the test's environment: enough to
// run, nothing that configures Mnemos (no API keys, no MNEMOS_*).
func cleanEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Mnemos starts `mnemos <args>` with env (MNEMOS_* variables) and waits
// until it serves /readyz. HTTP and the operator listener listen on free
// ports unless env sets MNEMOS_HTTP_ADDR or MNEMOS_ADMIN_ADDR; logs are at
// warn level unless env sets MNEMOS_LOG_LEVEL; it holds at most 8 Postgres
// connections unless env sets MNEMOS_DATABASE_MAX_CONNS (test packages run
// side by side against one server's 100). The process is killed when t
// ends.
func Mnemos(t testing.TB, bins Binaries, name string, env map[string]string, args ...string) *Process {
	t.Helper()
	full := map[string]string{
		"MNEMOS_HTTP_ADDR": "127.0.0.1:0", "MNEMOS_ADMIN_ADDR": "127.0.0.1:0", "MNEMOS_LOG_LEVEL": "warn",
		"MNEMOS_DATABASE_MAX_CONNS": "8",
	}
	for k, v := range env {
		full[k] = v
	}
	e := cleanEnv()
	for k, v := range full {
		e = append(e, k+"="+v)
	}
	p := &Process{name: name, bin: bins.Mnemos, args: args, env: e, t: t, ready: mnemosReady}
	p.start(t)
	return p
}

// mnemosReady waits for the HTTP address on the banner and a 200 from /readyz.
func mnemosReady(ctx context.Context, p *Process) error {
	for {
		if addr := p.Addr(); addr != "" {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
			if err != nil {
				return err
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		if err := p.pause(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// pause waits d, failing early when ctx ends or the process exits.
func (p *Process) pause(ctx context.Context, d time.Duration) error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-exited:
		return fmt.Errorf("%s exited with code %d before it was ready", p.name, p.ExitCode())
	case <-time.After(d):
		return nil
	}
}

// banner and adminBanner are the lines serve prints with the API's and the
// operator listener's addresses.
var (
	banner      = regexp.MustCompile(`^http\s+http://(\S+) `)
	adminBanner = regexp.MustCompile(`^admin\s+http://(\S+) `)
)

func (p *Process) start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	// Not bound to a context: the process lives until Kill or Stop.
	cmd := exec.CommandContext(context.Background(), p.bin, p.args...)
	cmd.Env = p.env
	cmd.SysProcAttr = sysProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.mu.Unlock()
		t.Fatalf("proctest: %s: %v", p.name, err)
	}
	cmd.Stderr = cmd.Stdout // one stream, in order
	p.runs++
	run := p.runs
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		t.Fatalf("proctest: start %s: %v", p.name, err)
	}
	p.cmd, p.addr, p.admin, p.code = cmd, "", "", 0
	exited := make(chan struct{})
	p.exited = exited
	p.mu.Unlock()

	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if m := banner.FindStringSubmatch(line); m != nil {
				p.mu.Lock()
				p.addr = m[1]
				p.mu.Unlock()
			}
			if m := adminBanner.FindStringSubmatch(line); m != nil {
				p.mu.Lock()
				p.admin = m[1]
				p.mu.Unlock()
			}
			p.log(fmt.Sprintf("[%s#%d] %s", p.name, run, line))
		}
	}()
	go func() {
		<-lines // every line read before Wait closes the pipe
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode() // -1 when a signal ended it
		}
		p.mu.Lock()
		p.code = code
		p.mu.Unlock()
		close(exited)
	}()
	if run == 1 {
		// Registered once, with the first start: whatever runs then is
		// killed, after the cleanups registered later (the test's bus, say).
		t.Cleanup(p.Kill)
	}

	if p.ready != nil {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		if err := p.ready(ctx, p); err != nil {
			t.Fatalf("proctest: %s did not become ready: %v", p.name, err)
		}
	}
}

// log writes a line of the child's output to the test's log, until the test ends.
func (p *Process) log(line string) {
	defer func() { _ = recover() }() // a line arriving after the test ended is dropped
	p.t.Log(line)
}

// Restart starts the process again, with the same command line and
// environment, after it exited (killed, stopped, or crashed on its own).
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	select {
	case <-p.Exited():
	default:
		t.Fatalf("proctest: %s is still running; kill or stop it first", p.name)
	}
	p.start(t)
}

// RestartWith is Restart with some environment variables changed ("" removes one).
func (p *Process) RestartWith(t testing.TB, env map[string]string) {
	t.Helper()
	var out []string
	for _, kv := range p.env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := env[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	p.env = out
	p.Restart(t)
}

// Kill sends SIGKILL (no shutdown, nothing drained) and waits for the exit.
func (p *Process) Kill() { p.signal(syscall.SIGKILL) }

// Stop sends SIGTERM (a graceful shutdown) and waits for the exit.
func (p *Process) Stop() { p.signal(syscall.SIGTERM) }

func (p *Process) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(sig) // it may have exited meanwhile
	<-exited
}

// Exited is closed when the current run of the process has ended.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// WaitExit waits up to timeout for the process to exit on its own and
// returns its exit code.
func (p *Process) WaitExit(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.Exited():
		return p.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("proctest: %s did not exit within %s", p.name, timeout)
		return 0
	}
}

// ExitCode is the exit code of the last run that ended (-1: a signal).
func (p *Process) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code
}

// Addr is the HTTP address the process printed at start-up ("" before).
func (p *Process) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// PeakRSS is the largest resident set the current run of the process has
// had, in bytes: VmHWM of /proc/<pid>/status, so only on Linux.
func (p *Process) PeakRSS() (int64, error) { return p.status("VmHWM") }

// RSS is the resident set of the current run of the process now, in
// bytes: VmRSS of /proc/<pid>/status, so only on Linux.
func (p *Process) RSS() (int64, error) { return p.status("VmRSS") }

// status reads a size in kB from the process's /proc/<pid>/status.
func (p *Process) status(field string) (int64, error) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return 0, fmt.Errorf("proctest: %s is not started", p.name)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("proctest: %s %s: %w", p.name, field, err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("proctest: %s %s: %q: %w", p.name, field, line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("proctest: %s: no %s in /proc/%d/status", p.name, field, cmd.Process.Pid)
}

// URL is the process's base HTTP URL.
func (p *Process) URL() string { return "http://" + p.Addr() }

// AdminAddr is the operator listener's address the process printed at
// start-up ("" before).
func (p *Process) AdminAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.admin
}

// AdminURL is the base URL of the process's operator listener (/metrics,
// /debug/pprof/).
func (p *Process) AdminURL() string { return "http://" + p.AdminAddr() }

// Pid is the process id of the current run.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Ready reports whether the process answers /readyz with 200.
func (p *Process) Ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// Metric sums the samples of a Prometheus metric the process serves on
// /metrics, on its operator listener, whose labels include every one of
// labels (0 when there are none).
func (p *Process) Metric(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	if p.AdminAddr() == "" {
		t.Fatalf("proctest: %s printed no admin address: it serves no /metrics", p.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.AdminURL()+"/metrics", nil)
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("proctest: %s /metrics: %v", p.name, err)
	}
	defer resp.Body.Close()
	sum, err := SumMetric(resp.Body, name, labels)
	if err != nil {
		t.Fatalf("proctest: %s /metrics: %v", p.name, err)
	}
	return sum
}

// SumMetric reads the Prometheus text format and sums the samples of name
// whose labels include labels.
func SumMetric(r io.Reader, name string, labels map[string]string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var set string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.Index(rest, "}")
			if end < 0 {
				continue
			}
			set, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric whose name starts with this one
		}
		match := true
		for k, v := range labels {
			match = match && strings.Contains(","+set+",", ","+k+"=\""+v+"\",")
		}
		if !match {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// NATS is a nats-server child with JetStream, on a port and a store
// directory that stay the same across restarts.
type NATS struct {
	*Process
	url     string
	monitor string // the monitoring endpoint's base URL; empty when it has none
}

// StartNATS starts a nats-server with JetStream on a free port, its store in
// a directory of t's, and waits until JetStream answers. It is killed when t
// ends.
func StartNATS(t testing.TB, bins Binaries) *NATS {
	t.Helper()
	port := freePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	p := &Process{
		name: "nats-server", bin: bins.NATSServer, env: cleanEnv(), t: t,
		args: []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", t.TempDir()},
		ready: func(ctx context.Context, p *Process) error {
			for {
				if err := jetStreamAnswers(ctx, url); err == nil {
					return nil
				}
				if err := p.pause(ctx, 100*time.Millisecond); err != nil {
					return err
				}
			}
		},
	}
	p.start(t)
	return &NATS{Process: p, url: url}
}

// URL is the server's client URL; it does not change across restarts.
func (n *NATS) URL() string { return n.url }

func jetStreamAnswers(ctx context.Context, url string) error {
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(ctx)
	return err
}

// freePort is a free TCP port on the loopback interface that a process
// keeps across its restarts. It is taken below the kernel's range of
// ephemeral ports: a port from that range (what listening on port 0 hands
// out) may become the source port of any outgoing connection while its
// process is down, and the process restarted on it then fails to listen
// (a cluster node killed and restarted under the chaos schedule did). Ports
// handed out in this test binary are not handed out again.
func freePort(t testing.TB) int {
	t.Helper()
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
	}
	lo, hi := 10000, ephemeralStart()
	for range 1000 {
		if hi-lo < 1000 {
			break // an unusual range: leave the choice to the kernel
		}
		port := lo + rand.IntN(hi-lo) //nolint:gosec // a port number needs no cryptographic randomness
		if ports.given[port] {
			continue
		}
		ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // in use
		}
		_ = ln.Close() // only its port number was wanted
		ports.given[port] = true
		return port
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proctest: free port: %v", err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// ports are the ports freePort handed out.
var ports struct {
	mu    sync.Mutex
	given map[int]bool
}

// ephemeralStart is the first port of the kernel's ephemeral range
// (32768 when it cannot be read).
func ephemeralStart() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return n
}

// CPUTime is the CPU time the current run of the process has used so far
// (see the package's CPUTime).
func (p *Process) CPUTime() (time.Duration, error) {
	pid := p.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("proctest: %s is not started", p.name)
	}
	return CPUTime(pid)
}
