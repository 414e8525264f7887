package simulator

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestCapacityFormula(t *testing.T) {
	c := DefaultConfig()
	c.Latency = LatencyConfig{TTFTBase: 10 * time.Millisecond, DecodeBase: 2 * time.Millisecond, DecodePerRunning: 250 * time.Microsecond}
	c.Scheduler.MaxRunning = 4
	got, err := c.Capacity(0, 16)
	if err != nil {
		t.Fatal(err)
	}
	if got.Service != 51250*time.Microsecond {
		t.Errorf("service %s, want 51.25ms", got.Service)
	}
	if want := 4 / 0.05125; math.Abs(got.RequestsPerSecond-want) > 1e-9 {
		t.Errorf("capacity %g, want %g", got.RequestsPerSecond, want)
	}
	c.Scheduler.KVCacheCapacityTokens = 10
	if _, err := c.Capacity(0, 16); err == nil || !strings.Contains(err.Error(), "KV tokens") {
		t.Errorf("KV-bound config: err %v", err)
	}
	if n := c.MaxRunningForTPOT(2500 * time.Microsecond); n != 3 {
		t.Errorf("MaxRunningForTPOT(2.5ms) = %d, want 3", n)
	}
	if n := c.MaxRunningForTPOT(time.Millisecond); n != 0 {
		t.Errorf("MaxRunningForTPOT(1ms) = %d, want 0", n)
	}
}
