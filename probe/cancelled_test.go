package probe

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// A probe its caller cancels is cancelled, one whose deadline passes is a
// timeout, whether it was waiting for the response head or reading the
// stream: only the deadline says something about the server.
func TestCallerCancelIsCancelledNotTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
	}{
		{"before the head", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}},
		{"mid-stream", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, tc.h)
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, nil)

			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			r := d.Probe(ctx, streamReq())
			wantOutcome(t, r, OutcomeCancelled, "probe cancelled after")
			if !errors.Is(r.Err, context.Canceled) {
				t.Errorf("err %v does not wrap context.Canceled", r.Err)
			}

			r = probeOnce(t, d, streamReq(), 200*time.Millisecond)
			wantOutcome(t, r, OutcomeTimeout, "probe deadline exceeded after")
		})
	}
}

func TestCancelOutcome(t *testing.T) {
	if got := cancelOutcome(context.Canceled); got != OutcomeCancelled {
		t.Errorf("cancelOutcome(Canceled) = %s", got)
	}
	if got := cancelOutcome(context.DeadlineExceeded); got != OutcomeTimeout {
		t.Errorf("cancelOutcome(DeadlineExceeded) = %s", got)
	}
}
