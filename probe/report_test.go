package probe

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWriteReport(t *testing.T) {
	r := &Result{
		RequestID: "abc123", StatusCode: 200, Streamed: true, Outcome: OutcomeSuccess,
		Phases: Phases{DNS: 1200 * time.Microsecond, HasDNS: true, Connect: 300 * time.Microsecond, HasConnect: true,
			Write: 50 * time.Microsecond, HasWrite: true, FirstByte: 12 * time.Millisecond, HasFirstByte: true},
		TTFT:        120 * time.Millisecond,
		Chunks:      chunks(120, 1, 130, 1, 140, 1, 190, 1, 200, 2),
		EndToEnd:    250 * time.Millisecond,
		InputTokens: 34, InputTokensSource: TokenSourceServer,
		OutputTokens: 6, OutputTokensSource: TokenSourceServer,
		FinishReason: "length",
	}
	var b strings.Builder
	if err := WriteReport(&b, "llama", "steady", r); err != nil {
		t.Fatal(err)
	}
	want := `target           llama / steady
outcome          success
request id       abc123
status           200
connection       new connection
  dns            1.20 ms
  connect        0.300 ms
  tls            -
  write          0.050 ms
  first byte     12.00 ms
ttft             120.0 ms
tpot             26.00 ms
itl              p50 10.00 ms  p95 50.00 ms  max 50.00 ms  (5 gaps over 5 chunks)
end-to-end       250.0 ms
output tokens/s  24.0
input tokens     34 (server)
output tokens    6 (server)
finish reason    length
`
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}

	failed := &Result{RequestID: "x", Outcome: OutcomeConnectError, Err: errors.New("connecting: dial tcp: connection refused"),
		Phases: Phases{ConnectionReused: true}, UsageInvalid: []string{UsageInputTokens, UsageOutputTokens}}
	b.Reset()
	if err := WriteReport(&b, "t", "", failed); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"target           t\n",
		"outcome          connect_error: connecting: dial tcp: connection refused\n",
		"status           none\n",
		"reused connection",
		"ttft             n/a (not streamed)\n",
		"tpot             n/a",
		"itl              n/a\n",
		"input tokens     unknown\n",
		"  dropped        input_tokens, output_tokens: the server's count was implausible",
		"finish reason    none\n",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}
}
