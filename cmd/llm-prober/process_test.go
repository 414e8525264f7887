package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildBinary builds the command into dir as make build does (no cgo).
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "llm-prober")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// TestProcessSignals runs the real binary: `kill -HUP` with a broken file
// keeps it serving the old config with reload_successful 0, a fixed file
// brings it back to 1, and SIGTERM stops it with exit code 0.
func TestProcessSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	writeFile(t, filepath.Join(dir, "key"), "sk-planted-secret-123456\n")
	cfgPath := filepath.Join(dir, "llm-prober.yml")
	writeFile(t, cfgPath, goodConfig)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	var logs syncBuffer
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--web.listen-address="+addr, "--log.level=debug")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	td := &testDaemon{url: "http://" + addr}
	waitFor(t, func() bool {
		resp, err := http.Get(td.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	writeFile(t, cfgPath, brokenConfig)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return metricValue(t, td, "llm_prober_config_last_reload_successful") == "0" })
	if _, _, cfg := get(t, "GET", td.url+"/config"); !strings.Contains(cfg, "name: first") {
		t.Errorf("old config not kept after SIGHUP with a broken file:\n%s", cfg)
	}
	writeFile(t, cfgPath, secondConfig)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return metricValue(t, td, "llm_prober_config_last_reload_successful") == "1" })

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit within 15s of SIGTERM")
	}
	if strings.Contains(logs.String(), "sk-planted") {
		t.Error("API key in the process's logs")
	}
	if !strings.Contains(logs.String(), `unknown protocol \"openia_chat\"`) && !strings.Contains(logs.String(), `unknown protocol "openia_chat"`) {
		t.Errorf("reload error not logged:\n%s", logs.String())
	}
}
