package testutil

import (
	"net"
	"strconv"
	"testing"
)

// FreeAddr draws below the kernel's ephemeral range, where no bind(":0")
// of another process can take the port before the child binds it, and
// the port it gives can be listened on.
func TestFreeAddrBelowEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	if lo <= firstDrawnPort {
		t.Skipf("the ephemeral range starts at %d, below %d: FreeAddr falls back to bind(\":0\")", lo, firstDrawnPort)
	}
	for range 20 {
		addr := FreeAddr(t)
		_, portText, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil || port < firstDrawnPort || port >= lo {
			t.Fatalf("FreeAddr = %s, want a port in [%d, %d)", addr, firstDrawnPort, lo)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listening on %s: %v", addr, err)
		}
		_ = l.Close()
	}
}
