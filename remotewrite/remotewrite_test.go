package remotewrite

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/promslog"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/llm-prober/llm-prober/config"
	itestutil "github.com/llm-prober/llm-prober/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// decoded is one sample as a receiver reads it.
type decoded struct {
	labels map[string]string
	value  float64
	ts     int64
}

// decode reads a WriteRequest back: the test's own, independent reading
// of the field numbers.
func decode(t testing.TB, b []byte) []decoded {
	t.Helper()
	var out []decoded
	fields := func(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64)) {
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				t.Fatal("bad tag")
			}
			b = b[n:]
			switch typ {
			case protowire.BytesType:
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					t.Fatal("bad bytes")
				}
				f(num, typ, v, 0)
				b = b[n:]
			case protowire.Fixed64Type:
				x, n := protowire.ConsumeFixed64(b)
				f(num, typ, nil, x)
				b = b[n:]
			case protowire.VarintType:
				x, n := protowire.ConsumeVarint(b)
				f(num, typ, nil, x)
				b = b[n:]
			default:
				t.Fatalf("unexpected wire type %v", typ)
			}
		}
	}
	fields(b, func(num protowire.Number, _ protowire.Type, ts []byte, _ uint64) {
		if num != 1 {
			t.Fatalf("WriteRequest field %d", num)
		}
		labels := map[string]string{}
		var samples []decoded
		fields(ts, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) {
			switch num {
			case 1:
				var name, value string
				fields(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) {
					if num == 1 {
						name = string(v)
					} else {
						value = string(v)
					}
				})
				labels[name] = value
			case 2:
				var s decoded
				fields(v, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) {
					if num == 1 {
						s.value = math.Float64frombits(x)
					} else {
						s.ts = int64(x)
					}
				})
				samples = append(samples, s)
			}
		})
		for _, s := range samples {
			s.labels = labels
			out = append(out, s)
		}
	})
	return out
}

// receiver is a remote-write endpoint that can be made to fail.
type receiver struct {
	mu     sync.Mutex
	bodies [][]byte
	down   atomic.Bool
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	b, _ := io.ReadAll(req.Body)
	raw, err := snappy.Decode(nil, b)
	if err != nil || req.Header.Get("Content-Encoding") != "snappy" || req.Header.Get("X-Prometheus-Remote-Write-Version") != "0.1.0" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, raw)
}

// series is what arrived of the series named name, in arrival order,
// decoded on the test's goroutine.
func (r *receiver) series(t *testing.T, name string) []decoded {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []decoded
	for _, b := range r.bodies {
		for _, s := range decode(t, b) {
			if s.labels["__name__"] == name {
				out = append(out, s)
			}
		}
	}
	return out
}

func loadConfig(t *testing.T, text string) *config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const moduleOnly = `
modules:
  chat: {protocol: openai_chat, model: m, allowed_targets: '.*'}
`

// An outage shorter than the queue holds loses nothing, and nothing
// arrives twice or out of order.
func TestOutageLosesNothingThatFits(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	cfg := loadConfig(t, moduleOnly+fmt.Sprintf(`
external_labels: {location: test-eu}
remote_write:
  - url: %s/api/v1/write
    interval: 1s
    queue_config: {capacity: 1000, max_samples_per_send: 7, min_backoff: 10ms, max_backoff: 100ms}
`, srv.URL))
	reg := prometheus.NewRegistry()
	ticks := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_ticks_total", Help: "Ticks."})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "test_seconds", Help: "h", Buckets: []float64{0.5, 1}})
	reg.MustRegister(ticks, h)
	selfReg := prometheus.NewRegistry()
	logs := &itestutil.SyncBuffer{}
	m := NewManager(promslog.New(&promslog.Config{Writer: logs}), reg, selfReg)
	m.Apply(cfg)
	for range 3 {
		ticks.Inc()
		h.Observe(0.7)
		time.Sleep(time.Second)
	}
	rcv.down.Store(true)
	time.Sleep(3 * time.Second)
	rcv.down.Store(false)
	time.Sleep(1500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	m.Stop(ctx)
	cancel()

	got := rcv.series(t, "test_ticks_total")
	if len(got) < 7 {
		t.Fatalf("%d samples of test_ticks_total arrived, want one per second for about 7 s", len(got))
	}
	for i, s := range got {
		if s.labels["location"] != "test-eu" {
			t.Fatalf("sample without the external label: %v", s.labels)
		}
		if i > 0 && s.ts <= got[i-1].ts {
			t.Fatalf("sample %d at %d after one at %d: out of order or twice", i, s.ts, got[i-1].ts)
		}
		if i > 0 && s.ts-got[i-1].ts > 1500 {
			t.Errorf("gap of %d ms between samples %d and %d: samples lost", s.ts-got[i-1].ts, i-1, i)
		}
	}
	buckets := rcv.series(t, "test_seconds_bucket")
	les := map[string]bool{}
	for _, b := range buckets {
		les[b.labels["le"]] = true
	}
	if !les["0.5"] || !les["1"] || !les["+Inf"] || len(les) != 3 {
		t.Errorf("histogram buckets %v", les)
	}
	if n := testutil.ToFloat64(m.metrics.failed.WithLabelValues(srv.URL + "/api/v1/write")); n < 1 {
		t.Errorf("no failed sends counted during the outage")
	}
	// The outage is said once, with the reason, not at every retry, and
	// so is its end.
	out := logs.String()
	if n := strings.Count(out, "Remote write failing; retrying with backoff"); n != 1 || !strings.Contains(out, "503") ||
		strings.Count(out, "Remote write succeeding again") != 1 {
		t.Errorf("the outage was logged %d times (want once, with the status, then its end once):\n%s", n, out)
	}
}

// A receiver down for longer than the queue holds costs the oldest
// samples, counted, and memory stays at the queue's capacity.
func TestQueueBounded(t *testing.T) {
	q := newQueue(10)
	ls := []Label{{"__name__", "x"}}
	mk := func(from, n int) []sample {
		var s []sample
		for i := range n {
			s = append(s, sample{labels: ls, value: float64(from + i), ts: int64(from + i)})
		}
		return s
	}
	if d := q.push(mk(0, 8)); d != 0 {
		t.Fatal(d)
	}
	batch, end := q.peek(nil, 5) // in flight: 0..4
	if d := q.push(mk(8, 6)); d != 4 {
		t.Fatalf("dropped %d, want 4", d)
	}
	q.ack(end) // 0..3 already dropped; only 4 is removed now
	rest, _ := q.peek(nil, 100)
	var vals []float64
	for _, s := range rest {
		vals = append(vals, s.value)
	}
	if want := []float64{5, 6, 7, 8, 9, 10, 11, 12, 13}; !slices.Equal(vals, want) {
		t.Errorf("queue holds %v, want %v (batch was %d)", vals, want, len(batch))
	}
	if d := q.push(mk(100, 25)); d != 24 || q.len() != 10 {
		t.Errorf("dropped %d, len %d", d, q.len())
	}
}

// A rejected batch is dropped and counted, not retried forever.
func TestRejectedDropped(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.Error(w, "out of order sample", http.StatusBadRequest)
	}))
	defer srv.Close()
	cfg := loadConfig(t, moduleOnly+fmt.Sprintf("remote_write: [{url: '%s', interval: 1s}]\n", srv.URL))
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "g"}))
	m := NewManager(promslog.NewNopLogger(), reg, nil)
	m.Apply(cfg)
	time.Sleep(1500 * time.Millisecond)
	m.Stop(context.Background())
	if n := testutil.ToFloat64(m.metrics.dropped.WithLabelValues(srv.URL, "rejected")); n < 1 {
		t.Errorf("rejected = %v", n)
	}
	if c := calls.Load(); c > 3 {
		t.Errorf("%d sends for two gathers: a rejected batch was retried", c)
	}
}
