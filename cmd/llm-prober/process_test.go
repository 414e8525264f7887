package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// TestProcessSignals runs the real binary: `kill -HUP` with a broken file
// keeps it serving the old config with reload_successful 0, a fixed file
// brings it back to 1, and SIGTERM stops it with exit code 0.
func TestProcessSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testutil.BuildBinary(t)
	cfgPath := testutil.WriteConfig(t, goodConfig, map[string]string{"key": plantedAPIKey + "\n"})
	addr := testutil.FreeAddr(t)
	p := testutil.StartProcess(t, "llm-prober", exec.Command(bin, "--config.file="+cfgPath, "--web.listen-address="+addr, "--log.level=debug"))
	td := &testDaemon{url: "http://" + addr}
	p.WaitReady(t, td.url)

	testutil.WriteFile(t, cfgPath, brokenConfig)
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "llm_prober_config_last_reload_successful 0 after SIGHUP", waitTimeout, func() bool {
		return metricValue(t, td, "llm_prober_config_last_reload_successful") == "0"
	})
	if _, _, cfg := get(t, "GET", td.url+"/config"); !strings.Contains(cfg, "name: first") {
		t.Errorf("old config not kept after SIGHUP with a broken file:\n%s", cfg)
	}
	testutil.WriteFile(t, cfgPath, secondConfig)
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "llm_prober_config_last_reload_successful 1 after SIGHUP", waitTimeout, func() bool {
		return metricValue(t, td, "llm_prober_config_last_reload_successful") == "1"
	})

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited, err := p.Wait(15 * time.Second)
	if !exited {
		t.Fatal("no exit within 15s of SIGTERM")
	}
	logs := p.Output()
	if err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, logs)
	}
	if strings.Contains(logs, "sk-planted") {
		t.Error("API key in the process's logs")
	}
	if !strings.Contains(logs, `unknown protocol \"openia_chat\"`) && !strings.Contains(logs, `unknown protocol "openia_chat"`) {
		t.Errorf("reload error not logged:\n%s", logs)
	}
}
