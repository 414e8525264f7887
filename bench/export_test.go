package bench

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/probe"
)

// TestExportRetryOther: a request retried for a reason without its own
// class (other) carries the first attempt's error in its exported line,
// redacted, after every earlier field; so does the server's load report.
func TestExportRetryOther(t *testing.T) {
	r := &probe.Result{RequestID: "r1", Start: time.Unix(1, 0), Outcome: probe.OutcomeSuccess, StatusCode: 200,
		Retry:      &probe.Retry{Reason: probe.RetryOther, Err: errors.New("tls: bad record MAC at https://u:planted-pw@x/")},
		ServerLoad: &probe.ServerLoad{Waiting: 4, HasWaiting: true, KVCacheUsage: 0.5, HasKVCache: true}}
	line := encodeRequestRecord(&Step{Index: 1, Mode: ModeConcurrency, Level: 2}, &record{}, r)
	var got requestRecord
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	if got.Retry != probe.RetryOther || !strings.Contains(got.RetryError, "tls: bad record MAC") || strings.Contains(string(line), "planted-pw") {
		t.Errorf("retry %q %q in %s", got.Retry, got.RetryError, line)
	}
	if l := got.ServerLoad; l == nil || l.Waiting == nil || *l.Waiting != 4 || l.Running != nil || l.KVCacheUsage == nil || *l.KVCacheUsage != 0.5 {
		t.Errorf("server load %+v in %s", got.ServerLoad, line)
	}
	// Appended: the existing fields keep their order.
	if i, j := strings.Index(string(line), `"phases"`), strings.Index(string(line), `"retry"`); i < 0 || j < i {
		t.Errorf("retry is not after the earlier fields: %s", line)
	}
	plain := encodeRequestRecord(&Step{}, &record{}, &probe.Result{Outcome: probe.OutcomeSuccess})
	if strings.Contains(string(plain), "retry") || strings.Contains(string(plain), "server_load") {
		t.Errorf("a request without retry or report exports them: %s", plain)
	}
}
