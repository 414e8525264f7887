package status

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/llm-prober/llm-prober/engine"
	"github.com/llm-prober/llm-prober/probe"
)

func streamedResult(start time.Time, ttft time.Duration, gaps ...time.Duration) *probe.Result {
	r := &probe.Result{RequestID: "req", Start: start, StatusCode: 200, Streamed: true, TTFT: ttft,
		Outcome: probe.OutcomeSuccess, FinishReason: "length", OutputTokensSource: probe.TokenSourceServer}
	at := ttft
	r.Chunks = append(r.Chunks, probe.Chunk{At: at, Tokens: 1})
	for _, g := range gaps {
		at += g
		r.Chunks = append(r.Chunks, probe.Chunk{At: at, Tokens: 1})
	}
	r.OutputTokens = len(r.Chunks)
	r.EndToEnd = at + time.Millisecond
	return r
}

var (
	testProbe     = HistoryProbe{Target: "t", Probe: "p", Protocol: "openai_chat", Endpoint: "http://x"}
	testProbeInfo = engine.Info{Target: "t", Probe: "p", Protocol: "openai_chat", Endpoint: "http://x"}
)

func TestHistoryRingKeepsNewestFirst(t *testing.T) {
	h := NewHistory(3)
	h.Add(testProbeInfo)
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		h.Record("t", "p", nil, streamedResult(t0.Add(time.Duration(i)*time.Second), time.Duration(i+1)*time.Millisecond))
	}
	recs, ok := h.Recent("t", "p")
	if !ok || len(recs) != 3 {
		t.Fatalf("Recent: %d records, known %v; want 3", len(recs), ok)
	}
	for i, want := range []int64{1004, 1003, 1002} {
		if got := recs[i].Start.Unix(); got != want {
			t.Errorf("record %d started at %d, want %d (newest first)", i, got, want)
		}
	}
	// Partly filled.
	h2 := NewHistory(10)
	h2.Add(testProbeInfo)
	h2.Record("t", "p", nil, streamedResult(t0, time.Millisecond))
	h2.Record("t", "p", nil, streamedResult(t0.Add(time.Second), time.Millisecond))
	if recs, _ := h2.Recent("t", "p"); len(recs) != 2 || recs[0].Start.Unix() != 1001 {
		t.Errorf("partly filled ring: %+v", recs)
	}
}

func TestHistoryDerivedNumbers(t *testing.T) {
	ms := time.Millisecond
	r := streamedResult(time.Unix(0, 0), 20*ms, 10*ms, 30*ms, 20*ms)
	rec := NewRecord(testProbe, nil, r)
	if rec.TTFT != 20*ms || rec.ITLP50 != 20*ms || rec.ITLMax != 30*ms || rec.ITLCount != 3 || rec.Chunks != 4 {
		t.Errorf("derived numbers: %+v", rec)
	}
	// TPOT = (e2e − TTFT) / (tokens − 1) = (81 − 20) / 3 ms.
	if want := 61 * ms / 3; !rec.HasTPOT || rec.TPOT != want {
		t.Errorf("TPOT %v, want %v", rec.TPOT, want)
	}
	if rec.Log != nil {
		t.Error("a success keeps a debug log")
	}
}

func TestHistorySummary(t *testing.T) {
	h := NewHistory(100)
	h.Add(testProbeInfo)
	t0 := time.Unix(0, 0)
	for i := range 20 {
		h.Record("t", "p", nil, streamedResult(t0.Add(time.Duration(i)*time.Second), time.Duration(i+1)*time.Millisecond))
	}
	fail := &probe.Result{Start: t0.Add(time.Minute), Streamed: true, TTFT: 500 * time.Millisecond, Outcome: probe.OutcomeIncomplete, Err: errors.New("EOF")}
	h.Record("t", "p", nil, fail)
	s, ok := h.Summary("t", "p")
	if !ok || s.Count != 21 || s.Successes != 20 || s.Last.Outcome != probe.OutcomeIncomplete {
		t.Fatalf("summary %+v", s)
	}
	// Nearest rank over the 20 successful TTFTs 1..20 ms; the failure's
	// TTFT is the last TTFT but not in the percentiles.
	if s.TTFTCount != 20 || s.TTFTP50 != 10*time.Millisecond || s.TTFTP95 != 19*time.Millisecond || s.LastTTFT != 500*time.Millisecond {
		t.Errorf("summary %+v", s)
	}
	if r := s.SuccessRatio(); r < 0.952 || r > 0.953 {
		t.Errorf("success ratio %v", r)
	}
}

func TestHistoryDebugLog(t *testing.T) {
	ms := time.Millisecond
	req := &probe.Request{Model: "m", MaxTokens: 64, Stream: true, Messages: []probe.Message{{Role: "user", Content: "the secret prompt"}}}
	r := streamedResult(time.Unix(0, 0), 20*ms, 10*ms)
	r.Outcome, r.Err, r.FinishReason = probe.OutcomeHTTP5xx, errors.New("mid-stream server error (code 502)"), ""
	r.Phases = probe.Phases{DNS: ms, Connect: 2 * ms, Write: ms, FirstByte: 5 * ms, HasDNS: true, HasConnect: true, HasWrite: true, HasFirstByte: true}
	rec := NewRecord(testProbe, req, r)
	var b strings.Builder
	for _, l := range rec.Log {
		fmt.Fprintf(&b, "%s %s\n", l.At.UTC().Format("05.000"), l.Msg)
	}
	want := `00.000 Sending openai_chat request to http://x: model="m" max_tokens=64 stream=true prompt=1 messages, 17 characters
00.001 DNS lookup done in 1.000 ms
00.003 Connected in 2.000 ms
00.004 Request written in 1.000 ms
00.009 Response head: status 200, first byte 5.000 ms after the request was written
00.020 First token after 20.000 ms (TTFT)
00.030 2 output chunks, 2 output tokens (server)
00.031 Answer ended without a finish reason
00.031 Probe failed after 31.000 ms: outcome=http_5xx err=mid-stream server error (code 502)
`
	if b.String() != want {
		t.Errorf("debug log:\n%s\nwant:\n%s", b.String(), want)
	}
	if strings.Contains(b.String(), "secret prompt") {
		t.Error("the prompt text is in the debug log")
	}
	// A refused connection: no head, no output.
	r = &probe.Result{Start: time.Unix(0, 0), Outcome: probe.OutcomeConnectError, Err: errors.New("connection refused"), EndToEnd: ms}
	rec = NewRecord(testProbe, req, r)
	if got := rec.Log[len(rec.Log)-1].Msg; !strings.Contains(got, "outcome=connect_error err=connection refused") {
		t.Errorf("last line %q", got)
	}
	if !strings.Contains(rec.Log[1].Msg, "No response head") {
		t.Errorf("log %+v", rec.Log)
	}
}

// TestHistoryMemoryBound feeds 10 000 failures with 1 MiB errors (and long
// ids and finish reasons) into a store of 100 and checks 100 are kept, each
// within its bounds, and that the heap holds about 100 records, not the
// megabyte errors they were cut from.
func TestHistoryMemoryBound(t *testing.T) {
	if got := unsafe.Sizeof(Record{}); got > recordFixedBytes {
		t.Errorf("Record is %d bytes, over recordFixedBytes %d: raise it and the documented bound", got, recordFixedBytes)
	}
	if got := unsafe.Sizeof(LogLine{}); got > logLineFixedBytes {
		t.Errorf("LogLine is %d bytes, over logLineFixedBytes %d", got, logLineFixedBytes)
	}
	const n = 100
	h := NewHistory(n)
	h.Add(testProbeInfo)
	big := strings.Repeat("é", 512<<10) // 1 MiB of two-byte runes
	shared := errors.New(big)
	req := &probe.Request{Model: strings.Repeat("m", 1000), MaxTokens: 8, Stream: true, Prompt: big[:4096]}
	for i := range 10_000 {
		r := streamedResult(time.Unix(int64(i), 0), time.Millisecond, time.Millisecond)
		r.Outcome = probe.OutcomeHTTP5xx
		r.RequestID = big[:1000]
		r.FinishReason = big[:1000]
		r.Err = shared
		if i >= 10_000-n {
			// The results that stay get a megabyte of their own, as a
			// server's error would be: a cut that shared it would keep it.
			r.Err = errors.New(strings.Clone(big) + fmt.Sprint(i))
			// A wrong answer's texts are cut too.
			r.Answer = strings.Clone(big)
			r.AssertionFailures = []probe.AssertionFailure{{Name: "a", Kind: probe.AssertEquals, Expected: big, Err: errors.New("differs")}}
			r.Retry = &probe.Retry{Reason: probe.RetryOther, Err: errors.New(strings.Clone(big))}
			r.ServerLoad = &probe.ServerLoad{HasWaiting: true, Err: errors.New(strings.Clone(big))}
		}
		h.Record("t", "p", req, r)
	}
	recs, _ := h.Recent("t", "p")
	if len(recs) != n {
		t.Fatalf("kept %d, want %d", len(recs), n)
	}
	for _, r := range recs {
		if len(r.Err) > MaxHistoryErrorBytes || len(r.RequestID) > maxHistoryIDBytes || len(r.FinishReason) > maxHistoryFinishBytes {
			t.Fatalf("strings over their bounds: err %d, id %d, finish %d", len(r.Err), len(r.RequestID), len(r.FinishReason))
		}
		if !utf8.ValidString(r.Err) || !strings.HasSuffix(r.Err, "…") {
			t.Fatalf("error not cut cleanly: …%q", r.Err[len(r.Err)-8:])
		}
		if len(r.RetryErr) > MaxHistoryRetryErrBytes || len(r.ServerLoad) > maxHistoryLoadBytes || r.RetryErr == "" || r.ServerLoad == "" {
			t.Fatalf("retry error of %d bytes, server load of %d", len(r.RetryErr), len(r.ServerLoad))
		}
		if a := r.Answer; a == nil || len(a.Expected) > MaxHistoryAnswerBytes || len(a.Received) > MaxHistoryAnswerBytes {
			t.Fatalf("answer check %+v not kept within its bounds", a)
		}
		if len(r.Log) == 0 || len(r.Log) > MaxHistoryLogLines {
			t.Fatalf("%d log lines", len(r.Log))
		}
		for _, l := range r.Log {
			if len(l.Msg) > MaxHistoryLogLineBytes || !utf8.ValidString(l.Msg) {
				t.Fatalf("log line of %d bytes", len(l.Msg))
			}
		}
	}
	// What the store retains: the heap with it minus the heap without it.
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	runtime.KeepAlive(h)
	h = nil
	recs = nil
	runtime.GC()
	runtime.ReadMemStats(&without)
	retained := int64(with.HeapAlloc) - int64(without.HeapAlloc)
	t.Logf("the store retains %d bytes for %d records (bound %d per record, %d for the probe)", retained, n, MaxRecordBytes, n*MaxRecordBytes)
	if limit := int64(n * MaxRecordBytes); retained > limit {
		t.Errorf("the store retains %d bytes, over %d: do cut strings keep their source alive?", retained, limit)
	}
}

// TestHistoryRetryOtherKeepsItsText: a retry whose first attempt failed
// for a reason without its own class (other) shows that attempt's error,
// redacted, in the debug log and on the result view.
func TestHistoryRetryOtherKeepsItsText(t *testing.T) {
	r := &probe.Result{Start: time.Unix(0, 0), Outcome: probe.OutcomeHTTP5xx, Err: errors.New("server error"), EndToEnd: time.Millisecond,
		Retry: &probe.Retry{Reason: probe.RetryOther, Err: errors.New("tls: bad record MAC from https://u:planted-pw@x/")}}
	rec := NewRecord(testProbe, nil, r)
	if rec.Retry != probe.RetryOther || !strings.Contains(rec.RetryErr, "tls: bad record MAC") || strings.Contains(rec.RetryErr, "planted-pw") {
		t.Fatalf("record retry %q %q", rec.Retry, rec.RetryErr)
	}
	var logged bool
	for _, l := range rec.Log {
		logged = logged || strings.Contains(l.Msg, "(other: tls: bad record MAC")
	}
	if !logged {
		t.Errorf("debug log lacks the first attempt's error: %+v", rec.Log)
	}
	v := waterfall(&rec, time.Unix(0, 0))
	if len(v.Notes) == 0 || !strings.Contains(v.Notes[0], "(other: tls: bad record MAC") {
		t.Errorf("result view notes %q", v.Notes)
	}
}

// TestHistoryServerLoad: the server's load report reaches the result
// view as one line.
func TestHistoryServerLoad(t *testing.T) {
	r := &probe.Result{Start: time.Unix(0, 0), Outcome: probe.OutcomeSuccess, EndToEnd: time.Millisecond,
		ServerLoad: &probe.ServerLoad{Waiting: 3, HasWaiting: true, KVCacheUsage: 0.5, HasKVCache: true}}
	rec := NewRecord(testProbe, nil, r)
	v := waterfall(&rec, time.Unix(0, 0))
	want := "Server load reported with the answer (endpoint-load-metrics): waiting 3, kv cache 50.0% (the server's, at this request)."
	if !slices.Contains(v.Notes, want) {
		t.Errorf("notes %q, want %q", v.Notes, want)
	}
	if rec = NewRecord(testProbe, nil, &probe.Result{Outcome: probe.OutcomeSuccess}); rec.ServerLoad != "" {
		t.Errorf("server load %q without a report", rec.ServerLoad)
	}
}

func TestHistoryAddRemoveAndDisabled(t *testing.T) {
	h := NewHistory(5)
	h.Add(testProbeInfo)
	h.Record("t", "p", nil, streamedResult(time.Unix(0, 0), time.Millisecond))
	h.Add(testProbeInfo) // a reload that changed nothing
	if recs, _ := h.Recent("t", "p"); len(recs) != 1 {
		t.Error("re-adding an unchanged probe dropped its results")
	}
	moved := testProbeInfo
	moved.Endpoint = "http://y"
	h.Add(moved)
	if recs, ok := h.Recent("t", "p"); !ok || len(recs) != 0 {
		t.Error("a probe whose endpoint changed kept the old endpoint's results")
	}
	h.Remove("t", "p")
	if _, ok := h.Recent("t", "p"); ok {
		t.Error("removed probe still known")
	}
	h.Record("t", "p", nil, streamedResult(time.Unix(0, 0), time.Millisecond)) // in flight during the reload
	if _, ok := h.Summary("t", "p"); ok {
		t.Error("a result of a removed probe recreated it")
	}
	var off *History = NewHistory(0)
	off.Add(testProbeInfo)
	off.Record("t", "p", nil, streamedResult(time.Unix(0, 0), time.Millisecond))
	if _, ok := off.Recent("t", "p"); ok || off.PerProbe() != 0 {
		t.Error("disabled history keeps results")
	}
}

func TestHistoryConcurrent(t *testing.T) {
	h := NewHistory(50)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			hp := testProbeInfo
			hp.Probe = fmt.Sprint("p", w%2)
			for i := range 500 {
				if i%100 == 0 {
					h.Add(hp)
				}
				h.Record(hp.Target, hp.Probe, nil, streamedResult(time.Unix(int64(i), 0), time.Millisecond))
				h.Summary(hp.Target, hp.Probe)
				h.Recent(hp.Target, hp.Probe)
				if i == 250 && w == 0 {
					h.Remove(hp.Target, hp.Probe)
				}
			}
		})
	}
	wg.Wait()
}

func TestHistoryPointsOldestFirstByStart(t *testing.T) {
	h := NewHistory(4)
	h.Add(testProbeInfo)
	t0 := time.Unix(1000, 0)
	// Recorded in the order they ended: the third started first.
	for i, start := range []int{1, 2, 0, 3, 4, 5} {
		r := streamedResult(t0.Add(time.Duration(start)*time.Second), time.Duration(i+1)*time.Millisecond, time.Millisecond)
		if i == 4 {
			r.Outcome, r.Err = probe.OutcomeTimeout, errors.New("timeout")
		}
		h.Record("t", "p", nil, r)
	}
	pts := h.Points("t", "p", nil)
	// The ring keeps the last 4 recorded (starts 0, 3, 4, 5), sorted.
	var starts []int64
	for _, p := range pts {
		starts = append(starts, p.At/int64(time.Second)-1000)
	}
	if fmt.Sprint(starts) != "[0 3 4 5]" {
		t.Errorf("starts %v, want [0 3 4 5]", starts)
	}
	if !pts[0].OK || !pts[0].HasTTFT || pts[0].TTFT != 3*time.Millisecond || !pts[0].HasTPOT || pts[2].OK {
		t.Errorf("points %+v", pts)
	}
	// Appends to dst; unknown probes and a nil history add nothing.
	if got := h.Points("t", "p", pts[:1]); len(got) != 5 {
		t.Errorf("appended %d, want 1 + 4", len(got))
	}
	if len(h.Points("t", "nope", nil)) != 0 || len((*History)(nil).Points("t", "p", nil)) != 0 {
		t.Error("points of an unknown probe")
	}
}

// A probe that has not run holds no ring, and a full ring holds exactly
// the configured number of records, whatever append would have grown.
func TestHistoryRingSize(t *testing.T) {
	h := NewHistory(100)
	h.Add(testProbeInfo)
	if ph := h.lookup("t", "p"); cap(ph.ring) != 0 {
		t.Errorf("a probe without results holds room for %d records", cap(ph.ring))
	}
	t0 := time.Unix(1000, 0)
	for i := range 250 {
		h.Record("t", "p", nil, streamedResult(t0.Add(time.Duration(i)*time.Second), time.Millisecond))
		if ph := h.lookup("t", "p"); cap(ph.ring) > 100 {
			t.Fatalf("after %d results the ring has room for %d records, over the 100 kept", i+1, cap(ph.ring))
		}
	}
	recs, _ := h.Recent("t", "p")
	if len(recs) != 100 || recs[0].Start.Unix() != 1249 || recs[99].Start.Unix() != 1150 {
		t.Errorf("kept %d records, newest %d, oldest %d; want 100 from 1249 to 1150", len(recs), recs[0].Start.Unix(), recs[len(recs)-1].Start.Unix())
	}
}
