package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFaultHeaderParse(t *testing.T) {
	d := DefaultConfig().Faults
	for _, tc := range []struct {
		in   string
		want string // canonical, joined by ";"
		err  string
	}{
		{in: "none", want: ""},
		{in: "error=503", want: "error:status=503"},
		{in: "error", want: "error:status=503"},
		{in: "error:status=429", want: "error:status=429"},
		{in: "reset:after=5", want: "reset:after=5"},
		{in: " stall:after=3,for=2s ; malformed:after=2", want: "stall:after=3,for=2s;malformed:after=2"},
		{in: "stall", want: "stall:after=0,for=2s"},
		{in: "slow_first_token:delay=1s", want: "slow_first_token:delay=1s"},
		{in: "truncate:after=4", want: "truncate:after=4"},
		{in: "error_event:after=2", want: "error_event:after=2,status=500"},
		{in: "", err: "empty"},
		{in: "boom", err: "unknown fault"},
		{in: "reset:after=-1", err: "after"},
		{in: "reset:after=x", err: "after"},
		{in: "reset:for=1s", err: "takes no parameter"},
		{in: "stall:for=0s", err: "duration"},
		{in: "stall:for=11m", err: "duration"},
		{in: "error=200", err: "status"},
		{in: "reset;reset", err: "twice"},
		{in: "reset:after=1,after=2", err: "twice"},
		{in: "reset:after", err: "key=value"},
		{in: ";", err: "missing fault name"},
		{in: strings.Repeat("a;", 600), err: "longer"},
	} {
		fs, err := parseFaultHeader(tc.in, d)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := strings.Join(fs.strings(), ";"); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzParseFaultHeader(f *testing.F) {
	for _, s := range []string{"none", "error=503", "reset:after=5", "stall:after=3,for=2s;malformed:after=2",
		"slow_first_token:delay=1s", "truncate:after=4", "error_event:after=1,status=502", "a:b=c,,", "x=;y"} {
		f.Add(s)
	}
	d := DefaultConfig().Faults
	f.Fuzz(func(t *testing.T, s string) {
		fs, err := parseFaultHeader(s, d)
		if err != nil {
			return
		}
		// What parses must round-trip through its canonical form.
		again, err := parseFaultHeader(strings.Join(fs.strings(), ";"), d)
		if len(fs) == 0 {
			return
		}
		if err != nil {
			t.Fatalf("canonical form of %q does not parse: %v", s, err)
		}
		if strings.Join(again.strings(), ";") != strings.Join(fs.strings(), ";") {
			t.Fatalf("round trip of %q changed it", s)
		}
		for _, f := range fs {
			if f.after < 0 || f.dur < 0 || f.dur > maxFaultDuration {
				t.Fatalf("out of range fault from %q: %+v", s, f)
			}
		}
	})
}

func TestOptionsHeaderParse(t *testing.T) {
	base := defaultOptions(DefaultConfig().Output)
	o, err := parseOptionsHeader("role_chunk=false;reasoning_tokens=3;tokens_per_chunk=2;separate_finish_chunk=true;", base)
	if err != nil || o.roleChunk != RoleChunkOff || o.reasoningTokens != 3 || o.tokensPerChunk != 2 || !o.separateFinishChunk {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range []string{"x=1", "role_chunk=maybe", "reasoning_tokens=-1", "tokens_per_chunk=2000", "role_chunk", "tokens_per_chunk=1;tokens_per_chunk=2"} {
		if _, err := parseOptionsHeader(bad, base); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// streamWithFault runs one chat stream with the given fault header and
// returns its events, the body's read error and the ground truth.
func streamWithFault(t *testing.T, ts *testServer, id, fault string, maxTokens int) ([]sseEvent, RequestRecord, error) {
	t.Helper()
	resp := ts.post(t, "/v1/chat/completions", chatBody(maxTokens, map[string]any{"ignore_eos": true, "stream_options": map[string]any{}}),
		"X-Request-Id", id, HeaderFault, fault)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d: %s", fault, resp.StatusCode, b)
	}
	evs, err := readSSE(resp.Body)
	return evs, ts.truth(t, id), err
}

func contentEvents(t *testing.T, evs []sseEvent) int {
	n := 0
	for _, e := range evs {
		var c chunkJSON
		if json.Unmarshal([]byte(e.data), &c) != nil || len(c.Choices) == 0 || c.Choices[0].Delta == nil {
			continue
		}
		if d := c.Choices[0].Delta; d.Content != nil && *d.Content != "" {
			n++
		}
	}
	return n
}

func TestStreamFaults(t *testing.T) {
	ts := startServer(t, fastConfig())

	t.Run("error status", func(t *testing.T) {
		resp := ts.post(t, "/v1/chat/completions", chatBody(5, nil), "X-Request-Id", "f-error", HeaderFault, "error=503")
		defer resp.Body.Close()
		var e openAIErrorBody
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != 503 || e.Error.Code != 503 || e.Error.Type != "ServiceUnavailableError" {
			t.Fatalf("status %d body %+v err %v", resp.StatusCode, e, err)
		}
		if r := ts.truth(t, "f-error"); r.Outcome != outcomeHTTPError || r.Status != 503 || r.Faults[0] != "error:status=503" {
			t.Fatalf("ground truth %+v", r)
		}
	})

	t.Run("reset is an error, not EOF", func(t *testing.T) {
		evs, r, err := streamWithFault(t, ts, "f-reset", "reset:after=3", 10)
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("body error %v, want a connection reset", err)
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Logf("reset surfaced as %v (not ECONNRESET)", err)
		}
		if n := contentEvents(t, evs); n > 3 {
			t.Fatalf("%d content chunks before reset, want at most 3", n)
		}
		if r.Outcome != outcomeReset || r.OutputTokens != 3 {
			t.Fatalf("ground truth outcome %s, %d tokens", r.Outcome, r.OutputTokens)
		}
	})

	t.Run("stall", func(t *testing.T) {
		evs, r, err := streamWithFault(t, ts, "f-stall", "stall:after=2,for=300ms", 5)
		if err != nil || evs[len(evs)-1].data != "[DONE]" {
			t.Fatalf("err %v, last %q", err, evs[len(evs)-1].data)
		}
		var content []ChunkRecord
		for _, c := range r.Chunks {
			if c.Kind == kindContent {
				content = append(content, c)
			}
		}
		if gap := time.Duration(content[2].UnixNano - content[1].UnixNano); gap < 300*time.Millisecond {
			t.Fatalf("gap after token 2 is %s, want >= 300ms", gap)
		}
		if gap := time.Duration(content[1].UnixNano - content[0].UnixNano); gap > 250*time.Millisecond {
			t.Fatalf("gap before the stall is %s", gap)
		}
	})

	t.Run("malformed", func(t *testing.T) {
		evs, r, err := streamWithFault(t, ts, "f-malformed", "malformed:after=2", 4)
		if err != nil || evs[len(evs)-1].data != "[DONE]" {
			t.Fatalf("err %v", err)
		}
		bad := 0
		for _, e := range evs[:len(evs)-1] {
			if !json.Valid([]byte(e.data)) {
				bad++
			}
		}
		if bad != 1 || contentEvents(t, evs) != 4 || r.Outcome != outcomeCompleted {
			t.Fatalf("%d invalid chunks, %d content, outcome %s", bad, contentEvents(t, evs), r.Outcome)
		}
	})

	t.Run("slow first token", func(t *testing.T) {
		_, r, err := streamWithFault(t, ts, "f-slow", "slow_first_token:delay=300ms", 2)
		if err != nil {
			t.Fatal(err)
		}
		if ttft := time.Duration(r.FirstTokenUnixNano - r.ReceivedUnixNano); ttft < 300*time.Millisecond {
			t.Fatalf("TTFT %s, want >= 300ms", ttft)
		}
	})

	t.Run("truncate", func(t *testing.T) {
		evs, r, err := streamWithFault(t, ts, "f-trunc", "truncate:after=4", 10)
		if err != nil {
			t.Fatalf("truncate should end cleanly, got %v", err)
		}
		for _, e := range evs {
			if e.data == "[DONE]" {
				t.Fatal("[DONE] sent on a truncated stream")
			}
		}
		if n := contentEvents(t, evs); n != 4 || r.Outcome != outcomeTruncated {
			t.Fatalf("%d content chunks, outcome %s", n, r.Outcome)
		}
	})

	t.Run("mid-stream error event", func(t *testing.T) {
		evs, r, err := streamWithFault(t, ts, "f-event", "error_event:after=2", 10)
		if err != nil || len(evs) < 2 || evs[len(evs)-1].data != "[DONE]" {
			t.Fatalf("err %v events %v", err, evs)
		}
		c := parseChunk(t, evs[len(evs)-2].data)
		if c.Error == nil || c.Error.Code != 500 || c.Error.Type != "InternalServerError" {
			t.Fatalf("error event %q", evs[len(evs)-2].data)
		}
		if r.Outcome != outcomeErrorEvent || contentEvents(t, evs) != 2 {
			t.Fatalf("outcome %s", r.Outcome)
		}
	})

	t.Run("faults at or past the end fire before the finish", func(t *testing.T) {
		evs, _, err := streamWithFault(t, ts, "f-late", "truncate:after=50", 3)
		if err != nil || contentEvents(t, evs) != 3 || evs[len(evs)-1].data == "[DONE]" {
			t.Fatalf("err %v events %v", err, evs)
		}
	})
}

func TestUnaryFaults(t *testing.T) {
	ts := startServer(t, fastConfig())
	body := chatBody(6, map[string]any{"stream": false, "ignore_eos": true})

	// A reset before any byte of the answer fails the request itself.
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, ts.url+"/v1/chat/completions", bytes.NewReader(data))
	req.Header.Set(HeaderFault, "reset:after=2")
	if resp, err := ts.client.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("reset: got status %d, want a connection error", resp.StatusCode)
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Logf("unary reset surfaced as %v", err)
	}

	resp := ts.post(t, "/v1/chat/completions", body, HeaderFault, "truncate")
	_, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncate: got %v, want unexpected EOF", err)
	}

	resp = ts.post(t, "/v1/chat/completions", body, HeaderFault, "malformed")
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || json.Valid(b) {
		t.Errorf("malformed: status %d, valid JSON %v, err %v", resp.StatusCode, json.Valid(b), err)
	}

	resp = ts.post(t, "/v1/chat/completions", body, HeaderFault, "error_event:after=3")
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("error_event: status %d", resp.StatusCode)
	}
}

func TestRandomFaults(t *testing.T) {
	cfg := fastConfig()
	cfg.Faults.ErrorRate = 1
	cfg.Faults.ErrorStatus = 429
	ts := startServer(t, cfg)
	for range 3 {
		resp := ts.post(t, "/v1/completions", completionBody(2, nil))
		resp.Body.Close()
		if resp.StatusCode != 429 {
			t.Fatalf("status %d, want 429", resp.StatusCode)
		}
	}
	// The header overrides the random draw.
	resp := ts.post(t, "/v1/completions", completionBody(2, nil), HeaderFault, "none")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("X-Sim-Fault: none gave %d", resp.StatusCode)
	}

	cfg = fastConfig()
	cfg.Faults.TruncateRate = 1
	ts2 := startServer(t, cfg)
	resp = ts2.post(t, "/v1/completions", completionBody(8, map[string]any{"ignore_eos": true}), "X-Request-Id", "rt")
	evs, err := readSSE(resp.Body)
	resp.Body.Close()
	if err != nil || len(evs) > 8 || ts2.truth(t, "rt").Outcome != outcomeTruncated {
		t.Fatalf("random truncate: err %v, %d events", err, len(evs))
	}
}
