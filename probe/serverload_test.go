package probe

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseServerLoad(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     ServerLoad
		err      string // part of Err; empty for none
	}{
		// vLLM @08408b8: Python float reprs, ", "-joined, V1's two metrics.
		{"vllm text", "TEXT named_metrics.num_requests_waiting=3.0, named_metrics.kv_cache_usage_perc=0.42",
			ServerLoad{Waiting: 3, HasWaiting: true, KVCacheUsage: 0.42, HasKVCache: true}, ""},
		{"vllm json", `JSON {"named_metrics": {"num_requests_waiting": 3.0, "kv_cache_usage_perc": 0.42}}`,
			ServerLoad{Waiting: 3, HasWaiting: true, KVCacheUsage: 0.42, HasKVCache: true}, ""},
		{"lower-case prefix and running", "text named_metrics.num_requests_running=2,named_metrics.num_requests_waiting=0",
			ServerLoad{Running: 2, HasRunning: true, HasWaiting: true}, ""},
		// The Rust front end omits the prefix.
		{"no prefix text", "named_metrics.kv_cache_usage_perc=1e-05",
			ServerLoad{KVCacheUsage: 1e-5, HasKVCache: true}, ""},
		{"no prefix json", `{"named_metrics":{"kv_cache_usage_perc":0.5}}`,
			ServerLoad{KVCacheUsage: 0.5, HasKVCache: true}, ""},
		{"other ORCA fields ignored", "TEXT cpu_utilization=0.3, rps_fractional=10.0, named_metrics.custom=7, named_metrics.num_requests_waiting=1",
			ServerLoad{Waiting: 1, HasWaiting: true}, ""},
		{"json other fields ignored", `JSON {"cpu_utilization": 0.3, "named_metrics": {"custom": "x", "num_requests_waiting": 1}}`,
			ServerLoad{Waiting: 1, HasWaiting: true}, ""},
		{"empty text", "TEXT ", ServerLoad{}, ""},
		{"empty json", "JSON", ServerLoad{}, "not a JSON load report"},
		{"nan kept out, rest kept", "TEXT named_metrics.num_requests_waiting=nan, named_metrics.kv_cache_usage_perc=0.1",
			ServerLoad{KVCacheUsage: 0.1, HasKVCache: true}, "num_requests_waiting: NaN is not a finite non-negative number"},
		{"inf", "TEXT named_metrics.num_requests_waiting=inf", ServerLoad{}, "+Inf is not a finite"},
		{"negative", "TEXT named_metrics.num_requests_running=-1", ServerLoad{}, "-1 is not a finite non-negative"},
		{"kv over 1", "TEXT named_metrics.kv_cache_usage_perc=42", ServerLoad{}, "42 is over 1"},
		{"huge count", "TEXT named_metrics.num_requests_waiting=1e300", ServerLoad{}, "not a plausible number"},
		{"not a number", "TEXT named_metrics.num_requests_waiting=lots", ServerLoad{}, `"lots" is not a number`},
		{"no equals", "TEXT named_metrics.num_requests_waiting", ServerLoad{}, "is not key=value"},
		// Python's json.dumps writes NaN, which is not JSON.
		{"python NaN", `JSON {"named_metrics": {"kv_cache_usage_perc": NaN}}`, ServerLoad{}, "not a JSON load report"},
		{"json string value", `JSON {"named_metrics": {"num_requests_waiting": "3"}}`, ServerLoad{}, "is not a number"},
		{"json not an object", "JSON [1,2]", ServerLoad{}, "not a JSON load report"},
		{"too long", "TEXT " + strings.Repeat("x", MaxServerLoadHeaderBytes), ServerLoad{}, "over the 4096-byte limit"},
		{"too many", "TEXT " + strings.Repeat("a=1,", MaxServerLoadMetrics) + "named_metrics.num_requests_waiting=1",
			ServerLoad{}, "more than 64 metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseServerLoad(tc.in)
			gotErr := got.Err
			got.Err = nil
			if *got != tc.want {
				t.Errorf("got %+v, want %+v", *got, tc.want)
			}
			switch {
			case tc.err == "" && gotErr != nil:
				t.Errorf("unexpected err %v", gotErr)
			case tc.err != "" && (gotErr == nil || !strings.Contains(gotErr.Error(), tc.err)):
				t.Errorf("err %v, want one containing %q", gotErr, tc.err)
			case gotErr != nil && !strings.HasPrefix(gotErr.Error(), HeaderLoadMetrics+": "):
				t.Errorf("err %q does not name the header", gotErr)
			}
		})
	}
}

func TestServerLoadPresent(t *testing.T) {
	var nilLoad *ServerLoad
	if nilLoad.Present() || (&ServerLoad{Err: errors.New("x")}).Present() {
		t.Error("an empty report is present")
	}
	if !(&ServerLoad{HasKVCache: true}).Present() {
		t.Error("a report with a KV value is not present")
	}
}

func FuzzParseServerLoad(f *testing.F) {
	for _, s := range []string{
		"TEXT named_metrics.num_requests_waiting=3.0, named_metrics.kv_cache_usage_perc=0.42",
		`JSON {"named_metrics": {"num_requests_waiting": 3.0, "kv_cache_usage_perc": 0.42}}`,
		"named_metrics.num_requests_running=1e308", `{"named_metrics":{"x":{}}}`, "JSON", "TEXT ,,=,",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := ParseServerLoad(s)
		if l == nil {
			t.Fatal("nil report")
		}
		for _, v := range []float64{l.Waiting, l.Running, l.KVCacheUsage} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxServerLoadCount {
				t.Fatalf("%q gave %+v", s, l)
			}
		}
		if l.KVCacheUsage > 1 {
			t.Fatalf("%q gave KV usage %v", s, l.KVCacheUsage)
		}
		if l.Err != nil && len(l.Err.Error()) > maxServerLoadErrBytes+len(HeaderLoadMetrics)+2 {
			t.Fatalf("error of %d bytes", len(l.Err.Error()))
		}
	})
}

// TestServerLoadReportAsked: with the option the request asks for the
// report and the answer's report lands in the Result (also of a
// non-streamed answer, the only kind vLLM adds it to); without it
// nothing is asked and a report sent anyway is not read.
func TestServerLoadReportAsked(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Header.Get(HeaderLoadMetricsFormat))
		w.Header().Set(HeaderLoadMetrics, "TEXT named_metrics.num_requests_waiting=2.0, named_metrics.kv_cache_usage_perc=0.25")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`))
	}))
	defer srv.Close()

	d, _ := newDriver(t, ProtocolOpenAIChat, srv.URL, func(o *TargetOptions) { o.ServerLoadReport = true })
	r := probeOnce(t, d, &Request{Prompt: "hello", MaxTokens: 8}, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	want := ServerLoad{Waiting: 2, HasWaiting: true, KVCacheUsage: 0.25, HasKVCache: true}
	if r.ServerLoad == nil || *r.ServerLoad != want {
		t.Fatalf("ServerLoad = %+v, want %+v", r.ServerLoad, want)
	}
	var b bytes.Buffer
	if err := WriteReport(&b, "t", "p", r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "waiting 2, kv cache 25.0% (the server's, at this request)") {
		t.Errorf("report lacks the server load:\n%s", b.String())
	}

	off, _ := newDriver(t, ProtocolOpenAIChat, srv.URL, nil)
	r = probeOnce(t, off, &Request{Prompt: "hello", MaxTokens: 8}, 5*time.Second)
	wantOutcome(t, r, OutcomeSuccess, "")
	if r.ServerLoad != nil {
		t.Errorf("read a report not asked for: %+v", r.ServerLoad)
	}
	if len(asked) != 2 || asked[0] != "text" || asked[1] != "" {
		t.Errorf("%s headers sent: %q, want text then none", HeaderLoadMetricsFormat, asked)
	}
}

// TestRetryOtherKeepsItsText: a first attempt that failed for a reason
// without its own class (other) keeps its error text for every output.
func TestRetryOtherKeepsItsText(t *testing.T) {
	err := errors.New("tls: bad record MAC")
	if got := retryReason(err); got != RetryOther {
		t.Fatalf("reason %q, want %q", got, RetryOther)
	}
	rt := &Retry{Reason: RetryOther, Err: err}
	if rt.ErrText() != "tls: bad record MAC" {
		t.Errorf("ErrText %q", rt.ErrText())
	}
	long := &Retry{Reason: RetryOther, Err: errors.New(strings.Repeat("é", MaxRetryErrBytes))}
	if n := len(long.ErrText()); n > MaxRetryErrBytes {
		t.Errorf("ErrText of %d bytes, over %d", n, MaxRetryErrBytes)
	}
	var b bytes.Buffer
	if err := WriteReport(&b, "t", "p", &Result{Outcome: OutcomeSuccess, Retry: rt}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(other: tls: bad record MAC)") {
		t.Errorf("report lacks the first attempt's error:\n%s", b.String())
	}
}

// TestLogDetails: the debug log line of a retry of reason other carries
// the first attempt's error; a load report is logged with what was
// dropped.
func TestLogDetails(t *testing.T) {
	var b bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	LogDetails(logger, &Result{RequestID: "r1", Retry: &Retry{Reason: RetryOther, Err: errors.New("tls: bad record MAC")},
		ServerLoad: ParseServerLoad("TEXT named_metrics.num_requests_waiting=1, named_metrics.kv_cache_usage_perc=7")})
	out := b.String()
	for _, want := range []string{`retry_reason=other retry_err="tls: bad record MAC"`, `load="waiting 1 (the server's, at this request)"`, "7 is over 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	LogDetails(logger, &Result{RequestID: "r2"})
	if b.Len() != 0 {
		t.Errorf("logged for a plain result: %s", b.String())
	}
}

// TestServerLoadOfHead: no header is no report; of two, the first is read
// and the second named.
func TestServerLoadOfHead(t *testing.T) {
	if l := serverLoadOf(http.Header{}); l != nil {
		t.Errorf("report %+v without the header", l)
	}
	h := http.Header{}
	h.Add(HeaderLoadMetrics, "TEXT named_metrics.num_requests_waiting=1")
	h.Add(HeaderLoadMetrics, "TEXT named_metrics.num_requests_waiting=9")
	l := serverLoadOf(h)
	if l == nil || l.Waiting != 1 || l.Err == nil || !strings.Contains(l.Err.Error(), "2 of these headers") {
		t.Errorf("two headers: %+v", l)
	}
}
