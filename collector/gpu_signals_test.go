//go:build cgo && !nonvml

package collector

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/llm-prober/llm-prober/internal/nvmltest"
)

const (
	lbl0 = `gpu="0",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"`
	lbl1 = `gpu="1",name="NVIDIA H100 80GB HBM3",uuid="` + uuid1 + `"`
)

// waitFor polls until cond holds, for what the XID watcher counts in the
// background.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestGPUErrorLinkProcessAndMIGSignals(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(2, map[string]string{
		"cuda":               "12080",
		"xid":                "0:79,0:79,1:48,0:13",
		"dev0.ecc.0.0":       "5",
		"dev0.ecc.0.1":       "120",
		"dev0.ecc.1.1":       "2",
		"dev0.remap.corr":    "3",
		"dev0.remap.unc":     "1",
		"dev0.remap.pending": "1",
		"dev0.pcie.gen":      "4",
		"dev0.pcie.replay":   "12",
		"dev0.procs":         "3",
		"dev0.proc0.pid":     "4242",
		"dev0.proc0.mem":     "50000000000",
		"dev0.proc1.pid":     "4243",
		"dev0.proc1.mem":     "1000000",
		"dev0.proc2.pid":     "77",
		"dev0.proc2.mem":     "2000000000",
		"pidname.4242":       "/usr/local/bin/python3",
		"pidname.77":         "tritonserver",
		// Device 1 runs MIG: no utilisation, no row remapping, instances.
		"dev1.util.ret":       "3",
		"dev1.remap.ret":      "3",
		"dev1.mig.current":    "1",
		"dev1.mig.max":        "7",
		"dev1.mig0.uuid":      "MIG-11111111-2222-3333-4444-555555555555",
		"dev1.mig0.name":      "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
		"dev1.mig0.gi":        "2",
		"dev1.mig0.mem.total": "42144366592",
		"dev1.mig0.mem.used":  "20000000000",
		"dev1.mig0.mem.free":  "22144366592",
		"dev1.mig3.uuid":      "MIG-66666666-2222-3333-4444-555555555555",
		"dev1.mig3.name":      "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
		"dev1.mig3.gi":        "9",
		"dev1.mig3.mem.total": "10468982784",
		"dev1.mig3.mem.used":  "0",
	}))
	waitFor(t, "XID events", func() bool {
		n, _ := promtestutil.GatherAndCount(f.reg, "llm_gpu_xid_errors_total")
		return n == 3
	})
	names := []string{"llm_gpu_info", "llm_gpu_xid_errors_total", "llm_gpu_ecc_errors_total",
		"llm_gpu_remapped_rows_total", "llm_gpu_row_remap_pending", "llm_gpu_row_remap_failed",
		"llm_gpu_pcie_link_generation", "llm_gpu_pcie_link_width", "llm_gpu_pcie_replays_total",
		"llm_gpu_processes", "llm_gpu_process_memory_used_bytes", "llm_gpu_mig_info",
		"llm_gpu_mig_memory_used_bytes", "llm_gpu_mig_memory_total_bytes", "llm_gpu_utilization_ratio",
		"llm_gpu_rejected_readings_total", "llm_prober_collector_success"}
	f.compare(t, gpuHelp(names...)+`
llm_gpu_info{compute_capability="9.0",cuda_driver_version="12.8",driver_version="550.54.15",`+lbl0+`,mig_mode="disabled"} 1
llm_gpu_info{compute_capability="9.0",cuda_driver_version="12.8",driver_version="550.54.15",`+lbl1+`,mig_mode="enabled"} 1
llm_gpu_xid_errors_total{`+lbl0+`,xid="13"} 1
llm_gpu_xid_errors_total{`+lbl0+`,xid="79"} 2
llm_gpu_xid_errors_total{`+lbl1+`,xid="48"} 1
llm_gpu_ecc_errors_total{`+lbl0+`,error="corrected",period="volatile"} 5
llm_gpu_ecc_errors_total{`+lbl0+`,error="corrected",period="aggregate"} 120
llm_gpu_ecc_errors_total{`+lbl0+`,error="uncorrected",period="volatile"} 0
llm_gpu_ecc_errors_total{`+lbl0+`,error="uncorrected",period="aggregate"} 2
llm_gpu_ecc_errors_total{`+lbl1+`,error="corrected",period="volatile"} 0
llm_gpu_ecc_errors_total{`+lbl1+`,error="corrected",period="aggregate"} 0
llm_gpu_ecc_errors_total{`+lbl1+`,error="uncorrected",period="volatile"} 0
llm_gpu_ecc_errors_total{`+lbl1+`,error="uncorrected",period="aggregate"} 0
llm_gpu_remapped_rows_total{`+lbl0+`,error="correctable"} 3
llm_gpu_remapped_rows_total{`+lbl0+`,error="uncorrectable"} 1
llm_gpu_row_remap_pending{`+lbl0+`} 1
llm_gpu_row_remap_failed{`+lbl0+`} 0
llm_gpu_pcie_link_generation{`+lbl0+`} 4
llm_gpu_pcie_link_generation{`+lbl1+`} 5
llm_gpu_pcie_link_width{`+lbl0+`} 16
llm_gpu_pcie_link_width{`+lbl1+`} 16
llm_gpu_pcie_replays_total{`+lbl0+`} 12
llm_gpu_pcie_replays_total{`+lbl1+`} 0
llm_gpu_processes{`+lbl0+`} 3
llm_gpu_processes{`+lbl1+`} 0
llm_gpu_process_memory_used_bytes{`+lbl0+`,pid="4242",process="python3"} 5e+10
llm_gpu_process_memory_used_bytes{`+lbl0+`,pid="77",process="tritonserver"} 2e+09
llm_gpu_process_memory_used_bytes{`+lbl0+`,pid="4243",process=""} 1e+06
llm_gpu_mig_info{`+lbl1+`,gpu_instance="2",mig_uuid="MIG-11111111-2222-3333-4444-555555555555",profile="NVIDIA H100 80GB HBM3 MIG 3g.40gb"} 1
llm_gpu_mig_info{`+lbl1+`,gpu_instance="9",mig_uuid="MIG-66666666-2222-3333-4444-555555555555",profile="NVIDIA H100 80GB HBM3 MIG 1g.10gb"} 1
llm_gpu_mig_memory_used_bytes{`+lbl1+`,gpu_instance="2"} 2e+10
llm_gpu_mig_memory_used_bytes{`+lbl1+`,gpu_instance="9"} 0
llm_gpu_mig_memory_total_bytes{`+lbl1+`,gpu_instance="2"} 4.2144366592e+10
llm_gpu_mig_memory_total_bytes{`+lbl1+`,gpu_instance="9"} 1.0468982784e+10
llm_gpu_utilization_ratio{`+lbl0+`} 0.87
llm_prober_collector_success{collector="gpu"} 1
`, names...)
	problems, err := promtestutil.GatherAndLint(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	// XID counts outlive scrapes; new events add to them.
	f.stub.Set(t, nvmltest.Devices(2, map[string]string{"xid": "0:79,0:79,1:48,0:13,0:79"}))
	waitFor(t, "a fifth XID event", func() bool {
		return promtestutil.GatherAndCompare(f.reg, strings.NewReader(sortLabels(t, gpuHelp("llm_gpu_xid_errors_total")+`
llm_gpu_xid_errors_total{`+lbl0+`,xid="13"} 1
llm_gpu_xid_errors_total{`+lbl0+`,xid="79"} 3
llm_gpu_xid_errors_total{`+lbl1+`,xid="48"} 1
`)), "llm_gpu_xid_errors_total") == nil
	})
}

// NOT_SUPPORTED (no ECC, pre-Ampere, a vGPU guest) leaves each new signal
// out on its own and the collection successful.
func TestGPUNewSignalsNotSupported(t *testing.T) {
	kv := nvmltest.Devices(1, map[string]string{"dev0.events": "0"})
	for _, g := range []string{"ecc", "remap", "retired", "pcie_gen", "pcie_width", "pcie_replay", "procs", "mig", "cc"} {
		kv["dev0."+g+".ret"] = "3"
	}
	f := newGPUFixture(t, kv)
	for _, name := range []string{"llm_gpu_ecc_errors_total", "llm_gpu_remapped_rows_total", "llm_gpu_row_remap_pending",
		"llm_gpu_retired_pages_pending", "llm_gpu_pcie_link_generation", "llm_gpu_pcie_link_width",
		"llm_gpu_pcie_replays_total", "llm_gpu_processes", "llm_gpu_process_memory_used_bytes",
		"llm_gpu_mig_info", "llm_gpu_xid_errors_total", "llm_gpu_rejected_readings_total"} {
		if n, _ := promtestutil.GatherAndCount(f.reg, name); n != 0 {
			t.Errorf("%s: %d series from a GPU that does not support it", name, n)
		}
	}
	f.compare(t, gpuHelp("llm_gpu_info", "llm_prober_collector_success")+`
llm_gpu_info{compute_capability="",cuda_driver_version="12.4",driver_version="550.54.15",`+lbl0+`,mig_mode=""} 1
llm_prober_collector_success{collector="gpu"} 1
`, "llm_gpu_info", "llm_prober_collector_success")
}

// Garbage from the library is counted and never exported: out-of-range
// values, processes with impossible memory or pid 0, and a process list
// whose reported length exceeds the buffer go-nvml gave it (go-nvml slices
// by that length and panics; the panic costs that one reading).
func TestGPUGarbageIsRejected(t *testing.T) {
	f := newGPUFixture(t, nvmltest.Devices(2, map[string]string{
		"dev0.util.gpu":    "250",
		"dev0.temp":        "4000000000",
		"dev0.power":       "4000000000",
		"dev0.pcie.width":  "4096",
		"dev0.mem.used":    "99999999999999",
		"dev0.procs":       "2",
		"dev0.procs.claim": "1000",
		"dev1.procs":       "3",
		"dev1.proc0.pid":   "0",
		"dev1.proc0.mem":   "100",
		"dev1.proc1.pid":   "10",
		"dev1.proc1.mem":   "999999999999999",
		"dev1.proc2.pid":   "11",
		"dev1.proc2.mem":   "4096",
		"xid":              "0:5000",
	}))
	waitFor(t, "the XID watcher to reject a garbage XID", func() bool {
		promtestutil.GatherAndCount(f.reg)
		f.c.loggedMu.Lock()
		defer f.c.loggedMu.Unlock()
		return f.c.rejected["xid"] == 1
	})
	names := []string{"llm_gpu_utilization_ratio", "llm_gpu_memory_bandwidth_utilization_ratio",
		"llm_gpu_temperature_celsius", "llm_gpu_power_watts", "llm_gpu_pcie_link_width", "llm_gpu_memory_used_bytes",
		"llm_gpu_processes", "llm_gpu_process_memory_used_bytes", "llm_gpu_xid_errors_total",
		"llm_gpu_rejected_readings_total", "llm_prober_collector_success"}
	// Each scrape rejects its readings again; the XID was rejected once.
	f.compare(t, gpuHelp(names...)+`
llm_gpu_utilization_ratio{`+lbl1+`} 0.87
llm_gpu_memory_bandwidth_utilization_ratio{`+lbl0+`} 0.42
llm_gpu_memory_bandwidth_utilization_ratio{`+lbl1+`} 0.42
llm_gpu_temperature_celsius{`+lbl1+`} 64
llm_gpu_power_watts{`+lbl1+`} 312.5
llm_gpu_pcie_link_width{`+lbl1+`} 16
llm_gpu_memory_used_bytes{`+lbl1+`} 6e+10
llm_gpu_processes{`+lbl1+`} 1
llm_gpu_process_memory_used_bytes{`+lbl1+`,pid="11",process=""} 4096
llm_gpu_rejected_readings_total{reading="utilization"} 2
llm_gpu_rejected_readings_total{reading="temperature"} 2
llm_gpu_rejected_readings_total{reading="power"} 2
llm_gpu_rejected_readings_total{reading="pcie_link_width"} 2
llm_gpu_rejected_readings_total{reading="memory"} 2
llm_gpu_rejected_readings_total{reading="processes"} 2
llm_gpu_rejected_readings_total{reading="process"} 4
llm_gpu_rejected_readings_total{reading="xid"} 1
llm_prober_collector_success{collector="gpu"} 1
`, names...)
	if !strings.Contains(f.logs.String(), "implausible reading") {
		t.Errorf("rejections not logged:\n%s", f.logs)
	}
}

// oldDriverOmits is what a driver from before NVML 11.6 (R510) lacks, plus
// everything newer and optional the collector calls, so one stub stands
// for "the oldest driver": only the core of the API remains.
var oldDriverOmits = []string{
	"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetComputeRunningProcesses_v3",
	"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperatureV",
	"nvmlDeviceGetRemappedRows", "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
	"nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetGpuInstanceId",
	"nvmlSystemGetCudaDriverVersion_v2", "nvmlEventSetWait_v2", "nvmlDeviceGetTotalEnergyConsumption",
	"nvmlDeviceGetPcieReplayCounter",
}

// TestGPUOldDriverInFreshProcess loads a stub lacking every optional
// function in a process of its own, where no other stub can stand in for
// a missing symbol: calling one would end the process with "symbol lookup
// error", so passing proves each is checked before use.
func TestGPUOldDriverInFreshProcess(t *testing.T) {
	if os.Getenv("LLM_PROBER_GPU_OLD_DRIVER_CHILD") != "" {
		oldDriverChild(t)
		return
	}
	stub := nvmltest.Build(t, oldDriverOmits...)
	stub.Set(t, nvmltest.Devices(2, map[string]string{"dev0.procs": "1", "dev0.mig.current": "1", "xid": "0:79"}))
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUOldDriverInFreshProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LLM_PROBER_GPU_OLD_DRIVER_CHILD="+stub.Path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process with an old driver failed: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		`llm_prober_collector_success{collector="gpu"} 1`,
		`llm_gpu_memory_used_bytes{` + lbl0 + `} 6.0520809984e+10`, // v1: used includes reserved
		`llm_gpu_temperature_celsius{` + lbl0 + `} 64`,
		`llm_gpu_clock_throttle_reason{gpu="0",name="NVIDIA H100 80GB HBM3",reason="gpu_idle",uuid="` + uuid0 + `"} 0`,
		// The CUDA version through the unsuffixed function; no MIG mode.
		`llm_gpu_info{compute_capability="9.0",cuda_driver_version="12.4",driver_version="550.54.15",gpu="0",mig_mode="",name="NVIDIA H100 80GB HBM3",uuid="` + uuid0 + `"} 1`,
		`function=nvmlDeviceGetRemappedRows`,
		`function=nvmlEventSetWait_v2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("child output lacks %q", want)
		}
	}
	for _, absent := range []string{"llm_gpu_remapped_rows_total", "llm_gpu_processes{", "llm_gpu_mig_", "llm_gpu_xid_errors_total{",
		"llm_gpu_energy_joules_total{", "llm_gpu_pcie_replays_total{", "llm_gpu_rejected_readings_total{"} {
		if strings.Contains(text, absent) {
			t.Errorf("child exported %s without the function behind it", absent)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

// oldDriverChild is the child's side: load, collect, print the exposition
// and the log.
func oldDriverChild(t *testing.T) {
	var logs bytes.Buffer
	c := NewGPUCollector(GPUOptions{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer c.Close()
	if err := c.Apply(GPUSettings{Mode: GPUOn, Library: os.Getenv("LLM_PROBER_GPU_OLD_DRIVER_CHILD")}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("exposition:\n%s\nlog:\n%s", b.String(), logs.String())
}
