package main

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// rwSample is one remote-written sample as a receiver reads it.
type rwSample struct {
	labels map[string]string
	value  float64
}

// rwReceiver is a remote-write endpoint that keeps every sample.
type rwReceiver struct {
	mu       sync.Mutex
	requests int
	samples  []rwSample
	errs     []string
}

func (r *rwReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	raw, err := snappy.Decode(nil, b)
	var got []rwSample
	if err == nil {
		got, err = decodeWriteRequest(raw)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.requests++
	r.samples = append(r.samples, got...)
}

// sum adds the values of the samples named name with the label pairs in
// kv.
func (r *rwReceiver) sum(name string, kv ...string) (total float64, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
outer:
	for _, s := range r.samples {
		if s.labels["__name__"] != name {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if s.labels[kv[i]] != kv[i+1] {
				continue outer
			}
		}
		total += s.value
		n++
	}
	return total, n
}

// decodeWriteRequest reads a remote-write 1.0 WriteRequest by its field
// numbers: timeseries (1) of labels (1: name 1, value 2) and samples (2:
// value 1, timestamp 2), independently of the prober's encoder.
func decodeWriteRequest(b []byte) ([]rwSample, error) {
	var out []rwSample
	var bad error
	fields := func(b []byte, f func(num protowire.Number, v []byte, x uint64)) {
		for len(b) > 0 && bad == nil {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				bad = protowire.ParseError(n)
				return
			}
			b = b[n:]
			var v []byte
			var x uint64
			switch typ {
			case protowire.BytesType:
				v, n = protowire.ConsumeBytes(b)
			case protowire.Fixed64Type:
				x, n = protowire.ConsumeFixed64(b)
			case protowire.VarintType:
				x, n = protowire.ConsumeVarint(b)
			default:
				bad = fmt.Errorf("field %d: unexpected wire type %v", num, typ)
				return
			}
			if n < 0 {
				bad = protowire.ParseError(n)
				return
			}
			f(num, v, x)
			b = b[n:]
		}
	}
	fields(b, func(num protowire.Number, ts []byte, _ uint64) {
		if num != 1 {
			return
		}
		labels := map[string]string{}
		var values []float64
		fields(ts, func(num protowire.Number, v []byte, _ uint64) {
			switch num {
			case 1:
				var name, value string
				fields(v, func(num protowire.Number, v []byte, _ uint64) {
					if num == 1 {
						name = string(v)
					} else if num == 2 {
						value = string(v)
					}
				})
				labels[name] = value
			case 2:
				fields(v, func(num protowire.Number, _ []byte, x uint64) {
					if num == 1 {
						values = append(values, math.Float64frombits(x))
					}
				})
			}
		})
		for _, v := range values {
			out = append(out, rwSample{labels: labels, value: v})
		}
	})
	return out, bad
}

// TestSIGTERMRecordsCancelledProbesInFinalFlush: a burst of probes that
// would take 20s is in flight when SIGTERM comes with a 3s shutdown
// timeout. The process must stop within the timeout, the probes must be
// cancelled early enough to be recorded as outcome cancelled, and remote
// write's final flush must carry those results: every probe started is
// accounted for, none counts for or against an SLO or a failure streak.
func TestSIGTERMRecordsCancelledProbesInFinalFlush(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const (
		burst           = 6
		shutdownTimeout = 3 * time.Second
		// slack covers the process's own start of shutdown and exit on
		// a loaded machine, not any phase of the shutdown.
		slack = 1500 * time.Millisecond
	)
	bin := testutil.BuildBinary(t)
	url := slowSimulator(t) // 400 tokens × 50ms: 20s per request
	rcv := &rwReceiver{}
	rw := httptest.NewServer(rcv)
	t.Cleanup(rw.Close)
	// The gather interval is an hour: what arrives is the final flush.
	cfgPath := testutil.WriteConfig(t, fmt.Sprintf(`targets:
  - name: sim
    protocol: openai_chat
    url: %s
    model: sim-llm
    probes:
      - {name: burst, timeout: 60s, slo: {ttft: 10s}, schedule: {burst: %d, period: 2s, max_in_flight: %[2]d}}
workloads:
  default: {max_tokens: 400, ignore_eos: true}
remote_write:
  - {url: %s, interval: 1h}
`, url, burst, rw.URL), nil)
	addr := testutil.FreeAddr(t)
	p := testutil.StartProcess(t, "llm-prober", exec.Command(bin, "--config.file="+cfgPath, "--web.listen-address="+addr,
		"--log.level=debug", "--web.shutdown-timeout="+shutdownTimeout.String()))
	base := "http://" + addr
	p.WaitReady(t, base)
	testutil.WaitFor(t, "a whole burst in flight", waitTimeout, func() bool {
		return testutil.Scrape(t, base).Sum("llm_probe_in_flight_requests", "probe", "burst") == burst
	})
	mark := len(p.Output())
	start := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited, err := p.Wait(shutdownTimeout + 30*time.Second)
	took := time.Since(start)
	if !exited {
		t.Fatalf("no exit within %s of SIGTERM", shutdownTimeout+30*time.Second)
	}
	after := p.Output()[mark:]
	if err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, after)
	}
	t.Logf("exited %s after SIGTERM (--web.shutdown-timeout=%s)", took.Round(time.Millisecond), shutdownTimeout)
	if took > shutdownTimeout+slack {
		t.Errorf("took %s to stop, want at most the shutdown timeout %s (+%s)", took.Round(time.Millisecond), shutdownTimeout, slack)
	}

	rcv.mu.Lock()
	requests, samples, errs := rcv.requests, len(rcv.samples), rcv.errs
	rcv.mu.Unlock()
	t.Logf("final flush: %d requests, %d samples", requests, samples)
	if len(errs) > 0 {
		t.Errorf("receiver could not read what it got: %v", errs)
	}
	if requests == 0 {
		t.Fatalf("no remote write arrived after SIGTERM:\n%s", after)
	}
	if strings.Contains(after, "samples unsent") {
		t.Errorf("remote write stopped with samples unsent:\n%s", after)
	}
	// Every series of the probe's requests arrived once: one gather.
	if _, n := rcv.sum("llm_probe_requests_total", "probe", "burst", "outcome", "success"); n != 1 {
		t.Errorf("llm_probe_requests_total{outcome=success} arrived %d times, want once (one final gather)", n)
	}
	cancelled, _ := rcv.sum("llm_probe_requests_total", "probe", "burst", "outcome", "cancelled")
	all, _ := rcv.sum("llm_probe_requests_total", "probe", "burst")
	scheduled, _ := rcv.sum("llm_probe_scheduled_total", "probe", "burst")
	skipped, _ := rcv.sum("llm_probe_skipped_total", "probe", "burst")
	inFlight, _ := rcv.sum("llm_probe_in_flight_requests", "probe", "burst")
	t.Logf("flushed: scheduled %v, requests %v (cancelled %v), skipped %v, in flight %v", scheduled, all, cancelled, skipped, inFlight)
	if cancelled != burst || all != burst {
		t.Errorf("final flush has %v requests, %v of them cancelled; want the %d in flight at SIGTERM, all cancelled", all, cancelled, burst)
	}
	if inFlight != 0 || scheduled != all+skipped {
		t.Errorf("final flush: scheduled %v != requests %v + skipped %v (in flight %v): probes lost", scheduled, all, skipped, inFlight)
	}
	// Cancelled requests are neither good nor bad, nor failures: only
	// the skips (concurrency_limit, while the burst held every slot)
	// count against the probe.
	against := 0.0
	for _, reason := range []string{"concurrency_limit", "target_concurrency_limit"} {
		v, _ := rcv.sum("llm_probe_skipped_total", "probe", "burst", "reason", reason)
		against += v
	}
	judged, _ := rcv.sum("llm_probe_slo_requests_total", "probe", "burst", "slo", "ttft")
	streak, _ := rcv.sum("llm_probe_consecutive_failures", "probe", "burst")
	if judged != against || streak != against {
		t.Errorf("SLO judged %v requests and the failure streak is %v; want only the %v skips", judged, streak, against)
	}
	if n := strings.Count(after, "outcome=cancelled"); n < burst {
		t.Errorf("%d results logged as cancelled, want %d:\n%s", n, burst, after)
	}
	if n := strings.Count(after, "Cancelled in-flight probes"); n != 1 {
		t.Errorf("the cancellation summary logged %d times, want once:\n%s", n, after)
	}
}
