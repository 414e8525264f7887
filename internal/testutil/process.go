package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// BuildTimeout bounds one go build: it has its own bound, outside the
// test's, because building is slow while go test builds other packages
// beside it.
const BuildTimeout = 5 * time.Minute

var builds struct {
	mu   sync.Mutex
	bins map[string]string // go build flags → binary
}

// BuildBinary builds llm-prober (./cmd/llm-prober) as make build does but
// for the version stamp: CGO_ENABLED=0, -trimpath, plus flags (with
// "-race", with cgo, as the race detector needs). It first reads the
// module's Go sources (RecordInputs), so that go test's cache reruns the
// test when they change.
//
// It builds once per test binary and set of flags, into the test binary's
// own directory in go test's work directory, which go test removes when it
// is done; a test binary run some other way builds into t.TempDir on every
// call.
func BuildBinary(t testing.TB, flags ...string) string {
	t.Helper()
	key := strings.Join(flags, " ")
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if bin, ok := builds.bins[key]; ok {
		return bin
	}
	dir, shared := sharedBuildDir()
	if !shared {
		dir = t.TempDir()
	}
	bin := filepath.Join(dir, fmt.Sprintf("llm-prober-%d", len(builds.bins)))
	RecordInputs(t, ".go", ".mod", ".sum")
	env := append(os.Environ(), "CGO_ENABLED=0")
	if slices.Contains(flags, "-race") {
		env = append(os.Environ(), "CGO_ENABLED=1")
	}
	args := append(append([]string{"build", "-trimpath", "-o", bin}, flags...), "./cmd/llm-prober")
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = RepoRoot(t)
	cmd.Env = env
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s (within %s): %v\n%s", strings.Join(args, " "), BuildTimeout, err, out)
	}
	t.Logf("built llm-prober in %s", time.Since(start).Round(time.Millisecond))
	if shared {
		if builds.bins == nil {
			builds.bins = map[string]string{}
		}
		builds.bins[key] = bin
	}
	return bin
}

// sharedBuildDir is the directory of the running test binary when go test
// built it into its work directory ($WORK/b001/pkg.test, $WORK being
// go-build<digits> under the temporary directory), which go test removes
// after the run.
func sharedBuildDir() (string, bool) {
	exe, err := os.Executable()
	if err != nil {
		return "", false
	}
	dir := filepath.Dir(exe)
	if !strings.HasPrefix(filepath.Base(filepath.Dir(dir)), "go-build") {
		return "", false
	}
	return dir, true
}

// StopTimeout is how long Process.Stop waits after SIGTERM before it kills.
const StopTimeout = 10 * time.Second

// Process is a child process started by StartProcess.
type Process struct {
	Name string
	Cmd  *exec.Cmd

	logPath  string // "" when the caller took stdout and stderr
	done     chan struct{}
	err      error // cmd.Wait's, once done is closed
	stopOnce sync.Once
	logf     func(format string, args ...any)
}

// StartProcess starts cmd, named name in messages, in its own process group
// (on Unix), so that stopping it also stops whatever it started. Where cmd
// leaves both stdout and stderr nil they go to a log file, read by Output
// and Tail. When the test ends the process is stopped (Stop) and, if the
// test failed, the end of its output logged.
func StartProcess(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Name: name, Cmd: cmd, done: make(chan struct{}), logf: t.Logf}
	var logFile *os.File
	if cmd.Stdout == nil && cmd.Stderr == nil {
		p.logPath = filepath.Join(t.TempDir(), "output.log")
		f, err := os.Create(p.logPath)
		if err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		cmd.Stdout, cmd.Stderr, logFile = f, f, f
	}
	newProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() && p.logPath != "" {
			t.Logf("--- last lines of %s (%s) ---\n%s", name, strings.Join(cmd.Args, " "), p.Tail(40))
		}
	})
	return p
}

// Stop sends SIGTERM to the process group (on Unix; elsewhere it kills),
// waits up to StopTimeout for the process to exit, then kills the group.
// Calling it again, or after the process exited, does nothing.
func (p *Process) Stop() {
	p.stopOnce.Do(func() {
		if p.Exited() {
			return
		}
		_ = terminate(p.Cmd.Process)
		select {
		case <-p.done:
		case <-time.After(StopTimeout):
			p.logf("%s did not stop within %s of SIGTERM; killing it", p.Name, StopTimeout)
			_ = kill(p.Cmd.Process)
			<-p.done
		}
	})
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits up to d for the process to exit: exited is false when it did
// not, err is exec.Cmd.Wait's (an *exec.ExitError for a non-zero exit).
// Once exited, Cmd.ProcessState is safe to read.
func (p *Process) Wait(d time.Duration) (exited bool, err error) {
	if p.Exited() {
		return true, p.err
	}
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

// Output is what the process wrote to its log so far ("" where the caller
// set stdout or stderr).
func (p *Process) Output() string {
	if p.logPath == "" {
		return ""
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(reading the output of %s: %v)", p.Name, err)
	}
	return string(b)
}

// Tail is the last n lines of Output, for failure messages.
func (p *Process) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Output(), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// WaitHTTP is the package's WaitHTTP, failing at once, with the end of the
// process's output, when the process exits first.
func (p *Process) WaitHTTP(t testing.TB, url string) {
	t.Helper()
	waitHTTP(t, url, func() string {
		if !p.Exited() {
			return ""
		}
		why := p.Name + " exited"
		if p.err != nil {
			why += " (" + p.err.Error() + ")"
		}
		if p.logPath != "" {
			why += ":\n" + p.Tail(40)
		}
		return why
	})
}

// WaitReady is WaitHTTP for baseURL/-/ready.
func (p *Process) WaitReady(t testing.TB, baseURL string) {
	t.Helper()
	p.WaitHTTP(t, baseURL+"/-/ready")
}
