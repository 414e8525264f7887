package simulator

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSlotReleaseParse(t *testing.T) {
	for v, want := range map[string]slotRelease{
		"": {}, "leak": {set: true, leak: true}, "0s": {set: true}, "250ms": {set: true, delay: 250 * time.Millisecond},
	} {
		if got, err := parseSlotRelease(v); err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", v, got, err, want)
		}
	}
	for _, bad := range []string{"never", "-1s", "11m", "1"} {
		if _, err := parseSlotRelease(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
		if _, err := parseOptionsHeader("disconnect_release="+bad, defaultOptions(DefaultConfig().Output)); err == nil {
			t.Errorf("header %q accepted", bad)
		}
		cfg := DefaultConfig()
		cfg.Faults.DisconnectRelease = bad
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "faults.disconnect_release") {
			t.Errorf("config %q: %v", bad, err)
		}
	}
	o, err := parseOptionsHeader("disconnect_release=leak", defaultOptions(DefaultConfig().Output))
	if err != nil || !o.disconnectRelease.leak {
		t.Errorf("header leak: %+v %v", o.disconnectRelease, err)
	}
}

// TestDisconnectRelease: a client that reads a few chunks and hangs up
// frees its slot at once by default, after the configured delay, or never
// with leak (the running gauge stays at 1) until POST
// /debug/slots/release; ground truth says when the disconnect was
// noticed and when the slot went. The per-request option overrides the
// configuration.
func TestDisconnectRelease(t *testing.T) {
	cfg := fastConfig()
	cfg.Faults.DisconnectRelease = "leak"
	ts := startServer(t, cfg)
	running := func() string {
		_, b := ts.get(t, "/metrics")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "vllm:num_requests_running{") {
				return l[strings.LastIndex(l, " ")+1:]
			}
		}
		t.Fatal("no vllm:num_requests_running")
		return ""
	}
	cut := func(id, option string) (RequestRecord, time.Time) {
		headers := []string{"X-Request-Id", id}
		if option != "" {
			headers = append(headers, HeaderOptions, "disconnect_release="+option)
		}
		resp := ts.post(t, "/v1/chat/completions", chatBody(500, map[string]any{"ignore_eos": true}), headers...)
		sc := bufio.NewScanner(resp.Body)
		for n := 0; n < 3 && sc.Scan(); {
			if strings.HasPrefix(sc.Text(), "data: ") {
				n++
			}
		}
		resp.Body.Close() // the transport closes the connection: the body was not read to its end
		closed := time.Now()
		return ts.truth(t, id), closed
	}

	rec, closed := cut("leak", "")
	if rec.Outcome != outcomeClientGone || !rec.SlotLeaked || rec.SlotReleasedUnixNano != 0 || rec.DisconnectUnixNano == 0 {
		t.Fatalf("leak: %+v", rec)
	}
	if lag := time.Unix(0, rec.DisconnectUnixNano).Sub(closed); lag > time.Second {
		t.Errorf("disconnect noticed %s after the close", lag)
	}
	if got := running(); got != "1" {
		t.Errorf("running with a leaked slot: %s", got)
	}
	if n := ts.srv.HeldSlots(); n != 1 {
		t.Errorf("%d held slots", n)
	}
	resp := ts.post(t, "/debug/slots/release", "")
	var freed map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&freed); err != nil || freed["released"] != 1 {
		t.Errorf("release endpoint: %v %v", freed, err)
	}
	resp.Body.Close()
	if got := running(); got != "0" {
		t.Errorf("running after the release endpoint: %s", got)
	}
	if rec = ts.truth(t, "leak"); rec.SlotLeaked || rec.SlotReleasedUnixNano == 0 {
		t.Errorf("after release: %+v", rec)
	}

	rec, _ = cut("delayed", "200ms")
	if rec.Outcome != outcomeClientGone || rec.SlotLeaked || rec.DisconnectUnixNano == 0 {
		t.Fatalf("delayed: %+v", rec)
	}
	if got := running(); got != "1" {
		t.Errorf("running before the delayed release: %s", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for rec.SlotReleasedUnixNano == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		rec = ts.truth(t, "delayed")
	}
	if d := time.Duration(rec.SlotReleasedUnixNano - rec.DisconnectUnixNano); d < 200*time.Millisecond || d > 400*time.Millisecond {
		t.Errorf("delayed release after %s, want 200ms", d)
	}
	if got := running(); got != "0" {
		t.Errorf("running after the delayed release: %s", got)
	}

	rec, _ = cut("at-once", "0s")
	if rec.Outcome != outcomeClientGone || rec.SlotReleasedUnixNano < rec.DisconnectUnixNano || rec.DisconnectUnixNano == 0 ||
		time.Duration(rec.SlotReleasedUnixNano-rec.DisconnectUnixNano) > 10*time.Millisecond {
		t.Errorf("at once: %+v", rec)
	}
	if got := running(); got != "0" || ts.srv.HeldSlots() != 0 {
		t.Errorf("running after an immediate release: %s, %d held", got, ts.srv.HeldSlots())
	}

	// A completed request's slot is not affected, and its release recorded.
	resp = ts.post(t, "/v1/chat/completions", chatBody(3, map[string]any{"stream": false}), "X-Request-Id", "whole")
	resp.Body.Close()
	if rec = ts.truth(t, "whole"); rec.Outcome != outcomeCompleted || rec.SlotReleasedUnixNano == 0 || rec.DisconnectUnixNano != 0 || rec.SlotLeaked {
		t.Errorf("completed: %+v", rec)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("completed: status %d", resp.StatusCode)
	}
}
