package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/llm-prober/llm-prober/simulator"
)

var update = flag.Bool("update", false, "recapture collector/testdata/server_* from the simulator and rewrite the golden files")

// lighthouseSystem is the 32-word system prompt every request of the
// load shares, two blocks of the simulator's prefix cache.
const lighthouseSystem = "You are a keeper of lighthouses on a rocky coast who answers every question about lamps, lenses, fog signals, tides, storms and ships in short plain sentences for curious visitors every day."

// simHeld is how many streams the load keeps open: simMaxRunning run,
// the rest wait.
const (
	simMaxRunning = 2
	simHeld       = 4
)

// simExpect is what the load did, from the simulator's ground truth.
type simExpect struct {
	success, failure        int
	promptTokens, genTokens float64
	cachedTokens            float64
	// The same, of the requests that completed: all trtllm-serve counts.
	completedPrompt, completedGen, completedCached float64
	running, waiting                               float64
	finishedThroughTheEngine                       int
}

type sim struct {
	url    string
	cancel context.CancelFunc
	close  func()
}

// startLoadedSim starts a simulator in the naming and drives it into a
// known state: three requests finished, one ended by an error event, one
// truncated (abort), and simHeld long streams held open so that
// simMaxRunning run and the rest wait.
func startLoadedSim(t *testing.T, naming string) (*sim, simExpect) {
	t.Helper()
	cfg := simulator.DefaultConfig()
	cfg.Metrics.Naming = naming
	cfg.Latency.TTFTBase = 2 * time.Millisecond
	cfg.Latency.DecodeBase = 20 * time.Millisecond
	cfg.Latency.Jitter = 0
	cfg.Scheduler.MaxRunning = simMaxRunning
	cfg.Scheduler.KVCacheCapacityTokens = 16384
	cfg.PrefixCache.Enabled = true
	srv, err := simulator.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	client := ts.Client()
	ctx, cancel := context.WithCancel(context.Background())
	s := &sim{url: ts.URL, cancel: cancel}
	s.close = func() {
		cancel()
		ts.Close()
		client.CloseIdleConnections()
	}
	t.Cleanup(s.close)

	post := func(ctx context.Context, id string, maxTokens int, stream bool, fault string) (*http.Response, error) {
		body, _ := json.Marshal(map[string]any{
			"model": "sim-llm", "max_tokens": maxTokens, "ignore_eos": true, "stream": stream,
			"messages": []map[string]string{{"role": "system", "content": lighthouseSystem}, {"role": "user", "content": "Tell me about lighthouses " + id}},
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", id)
		if fault != "" {
			req.Header.Set(simulator.HeaderFault, fault)
		}
		return client.Do(req)
	}
	truth := func(id string) simulator.RequestRecord {
		resp, err := client.Get(ts.URL + "/debug/requests/" + id + "?wait=5s")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r simulator.RequestRecord
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		if !r.Done {
			t.Fatalf("request %s not done: %+v", id, r)
		}
		return r
	}

	var exp simExpect
	finished := []struct{ id, fault string }{
		{"ok-1", ""}, {"ok-2", ""}, {"ok-3", ""},
		{"err-1", "error_event:after=2"}, {"trunc-1", "truncate:after=1"},
	}
	for _, f := range finished {
		resp, err := post(context.Background(), f.id, 3, true, f.fault)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		r := truth(f.id)
		exp.promptTokens += float64(r.PromptTokens)
		exp.cachedTokens += float64(r.CachedPromptTokens)
		exp.genTokens += float64(r.OutputTokens)
		if f.fault == "" {
			exp.success++
			exp.completedPrompt += float64(r.PromptTokens)
			exp.completedGen += float64(r.OutputTokens)
			exp.completedCached += float64(r.CachedPromptTokens)
		} else {
			exp.failure++
		}
	}
	exp.finishedThroughTheEngine = len(finished)

	for i := range simHeld {
		go func() {
			resp, err := post(ctx, fmt.Sprintf("held-%d", i), 4000, true, "")
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	exp.running, exp.waiting = simMaxRunning, simHeld-simMaxRunning

	// Wait until the held streams are in the engine.
	n := newNormaliser()
	deadline := time.Now().Add(10 * time.Second)
	for {
		body := getText(t, client, ts.URL+"/metrics")
		res, err := n.normalise(body, false, KindAuto)
		if err == nil && sampleValue(res.samples, serverRequestsRunning, "") == exp.running &&
			sampleValue(res.samples, serverRequestsWaiting, "") == exp.waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("simulator never reached %v running, %v waiting: %v %+v", exp.running, exp.waiting, err, res.samples)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s, exp
}

func getText(t *testing.T, c *http.Client, url string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sampleValue(ss []serverSample, out, extra string) float64 {
	for _, s := range ss {
		if s.out == out && s.extra == extra {
			return s.value
		}
	}
	return -1
}

// TestServerMetricsAgainstSimulator checks the normalised values against
// what the simulator did, in every naming it has.
func TestServerMetricsAgainstSimulator(t *testing.T) {
	for _, naming := range simulator.MetricsNamings() {
		t.Run(naming, func(t *testing.T) {
			s, exp := startLoadedSim(t, naming)
			c := NewServerMetrics(nil)
			defer c.Close()
			c.SetTargets([]ServerTarget{{Name: "sim", URL: s.url + "/metrics", Kind: KindAuto, Timeout: 5 * time.Second}})
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			got := gatherValues(t, reg)

			model := `model="sim-llm",`
			if naming == simulator.NamingTGI {
				model = `model="",`
			}
			lbl := func(extra string) string {
				return "{" + model + extra + `server="` + naming + `",target="sim"}`
			}
			want := map[string]float64{
				"llm_server_up{target=\"sim\"}":                            1,
				serverRequestsRunning + lbl(""):                            exp.running,
				serverRequestsWaiting + lbl(""):                            exp.waiting,
				serverRequestsTotal + lbl(`result="success",`):             float64(exp.success),
				serverRequestsTotal + lbl(`result="failure",`):             float64(exp.failure),
				serverPromptTokens + lbl(""):                               exp.promptTokens,
				serverGenerationTokens + lbl(""):                           exp.genTokens,
				serverPhaseRequests + lbl(`phase="queue",`):                float64(exp.finishedThroughTheEngine),
				serverPhaseRequests + lbl(`phase="e2e",`):                  float64(exp.finishedThroughTheEngine),
				`llm_prober_collector_success{collector="server_metrics"}`: 1,
			}
			if naming == simulator.NamingVLLM || naming == simulator.NamingSGLang {
				// Every request shares the 32-word system prompt: all but
				// the first have its two blocks cached.
				if exp.cachedTokens != 32*float64(exp.finishedThroughTheEngine-1) {
					t.Errorf("ground truth: %v cached tokens", exp.cachedTokens)
				}
				want[serverPrefixQueries+lbl("")] = exp.promptTokens
				want[serverPrefixHits+lbl("")] = exp.cachedTokens
			}
			if naming == simulator.NamingTriton {
				// Triton counts durations beside successful requests only.
				want[serverPhaseRequests+lbl(`phase="queue",`)] = float64(exp.success)
				want[serverPhaseRequests+lbl(`phase="e2e",`)] = float64(exp.success)
			}
			if naming == simulator.NamingTriton || naming == simulator.NamingTGI || naming == simulator.NamingTRTLLM {
				want[serverBatchSize+lbl("")] = exp.running
			}
			// SGLang has no success counter: only the finished count.
			var absent []string
			if naming == simulator.NamingSGLang {
				delete(want, serverRequestsTotal+lbl(`result="success",`))
				delete(want, serverRequestsTotal+lbl(`result="failure",`))
				absent = append(absent, serverRequestsTotal+lbl(`result="success",`), serverRequestsTotal+lbl(`result="failure",`))
				want[serverRequestsFinished+lbl(`reason="all",`)] = float64(exp.finishedThroughTheEngine)
			}
			// trtllm-serve counts only requests that finished with a
			// reason: the error and the truncated one are nowhere.
			if naming == simulator.NamingTRTLLM {
				delete(want, serverRequestsTotal+lbl(`result="failure",`))
				absent = append(absent, serverRequestsTotal+lbl(`result="failure",`))
				want[serverPromptTokens+lbl("")] = exp.completedPrompt
				want[serverGenerationTokens+lbl("")] = exp.completedGen
				want[serverPrefixQueries+lbl("")] = exp.completedPrompt
				want[serverPrefixHits+lbl("")] = exp.completedCached
				want[serverPhaseRequests+lbl(`phase="queue",`)] = float64(exp.success)
				want[serverPhaseRequests+lbl(`phase="e2e",`)] = float64(exp.success)
				want[serverRequestsFinished+lbl(`reason="length",`)] = float64(exp.success)
			}
			if naming == simulator.NamingVLLM {
				want[serverWaitingByReason+lbl(`reason="capacity",`)] = exp.waiting
				want[serverWaitingByReason+lbl(`reason="deferred",`)] = 0
				want[serverRequestsFinished+lbl(`reason="length",`)] = float64(exp.success)
			}
			for _, k := range absent {
				if v, ok := got[k]; ok {
					t.Errorf("%s = %v, want absent", k, v)
				}
			}
			for k, v := range want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
				}
			}
			kv, ok := got[serverKVCacheUsage+lbl("")]
			if !ok || kv <= 0 || kv > 1 {
				t.Errorf("kv cache usage = %v (present %v), want in (0, 1]", kv, ok)
			}
			for _, p := range []string{"queue", "e2e"} {
				if v := got[serverPhaseSeconds+lbl(`phase="`+p+`",`)]; !(v > 0) {
					t.Errorf("phase %s seconds = %v, want > 0", p, v)
				}
			}
			problems, err := testutil.GatherAndLint(reg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
		})
	}
}

// gatherValues flattens a registry into "name{labels}" → value.
func gatherValues(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var l []string
			for _, lp := range m.GetLabel() {
				l = append(l, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			v := m.GetGauge().GetValue()
			if mf.GetType() == dto.MetricType_COUNTER {
				v = m.GetCounter().GetValue()
			}
			out[mf.GetName()+"{"+strings.Join(l, ",")+"}"] = v
		}
	}
	return out
}

// TestServerGolden normalises each captured exposition (auto-detected) and
// compares the result with the golden file. With -update the simulator
// expositions are recaptured first; llama.cpp's is a real server's.
func TestServerGolden(t *testing.T) {
	kinds := append(simulator.MetricsNamings(), KindLlamaCPP)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			in := filepath.Join("testdata", "server_"+kind+".prom")
			if *update && kind != KindLlamaCPP {
				s, _ := startLoadedSim(t, kind)
				body := getText(t, http.DefaultClient, s.url+"/metrics")
				if err := os.WriteFile(in, body, 0o644); err != nil {
					t.Fatal(err)
				}
				s.close()
			}
			exposition, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := normalisedText(t, exposition, "text/plain; version=0.0.4", KindAuto)
			golden := filepath.Join("testdata", "server_"+kind+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("normalised %s differs from %s (run go test -run TestServerGolden -update and read the diff):\n%s", in, golden, got)
			}
			if !strings.Contains(string(got), `server="`+kind+`"`) {
				t.Errorf("auto did not detect %s", kind)
			}
		})
	}
}

// normalisedText serves an exposition, scrapes it through the collector
// and renders the llm_server_* series that do not depend on timing.
func normalisedText(t *testing.T, exposition []byte, contentType, kind string) []byte {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(exposition)
	}))
	defer ts.Close()
	c := NewServerMetrics(nil)
	defer c.Close()
	c.SetTargets([]ServerTarget{{Name: "t", URL: ts.URL, Kind: kind, Timeout: 5 * time.Second}})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	sort.Slice(mfs, func(i, j int) bool { return mfs[i].GetName() < mfs[j].GetName() })
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "llm_server_") || mf.GetName() == serverScrapeDuration {
			continue
		}
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}
