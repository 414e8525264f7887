package remotewrite

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/version"

	"github.com/llm-prober/llm-prober/config"
	"github.com/llm-prober/llm-prober/internal/redact"
)

// metrics are the remote writes' own, labelled by the receiver's URL
// (without credentials or query).
type metrics struct {
	sent, dropped, failed *prometheus.CounterVec
	queued, capacity      *prometheus.GaugeVec
	lastSend              *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_prober_remote_write_samples_sent_total",
			Help: "Samples the remote-write receiver accepted.",
		}, []string{"url"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_prober_remote_write_samples_dropped_total",
			Help: "Samples never sent: queue_full (the oldest, to make room while the receiver was slow or down) or rejected (the receiver answered 4xx).",
		}, []string{"url", "reason"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_prober_remote_write_failed_sends_total",
			Help: "Sends that failed and were retried (network errors, HTTP 5xx and 429).",
		}, []string{"url"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llm_prober_remote_write_queue_samples",
			Help: "Samples waiting to be sent.",
		}, []string{"url"}),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llm_prober_remote_write_queue_capacity_samples",
			Help: "Samples the queue holds at most (queue_config.capacity).",
		}, []string{"url"}),
		lastSend: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llm_prober_remote_write_last_success_timestamp_seconds",
			Help: "Unix time of the last send the receiver accepted.",
		}, []string{"url"}),
	}
	if reg != nil {
		reg.MustRegister(m.sent, m.dropped, m.failed, m.queued, m.capacity, m.lastSend)
	}
	return m
}

func (m *metrics) forget(u string) {
	for _, v := range []*prometheus.CounterVec{m.sent, m.failed} {
		v.DeleteLabelValues(u)
	}
	m.dropped.DeletePartialMatch(prometheus.Labels{"url": u})
	for _, v := range []*prometheus.GaugeVec{m.queued, m.capacity, m.lastSend} {
		v.DeleteLabelValues(u)
	}
}

// Manager runs one writer per remote_write entry and restarts those whose
// configuration (or the external labels) changed on reload.
type Manager struct {
	logger   *slog.Logger
	gatherer prometheus.Gatherer
	metrics  *metrics

	mu      sync.Mutex
	writers []*writer
}

// NewManager writes what gatherer gathers; its own metrics go to reg.
func NewManager(logger *slog.Logger, gatherer prometheus.Gatherer, reg prometheus.Registerer) *Manager {
	return &Manager{logger: logger, gatherer: gatherer, metrics: newMetrics(reg)}
}

// Apply starts the writers of cfg and stops the others, flushing what
// they hold for at most a second.
func (m *Manager) Apply(cfg *config.Config) {
	ext := externalLabels(cfg.ExternalLabels)
	m.mu.Lock()
	old := m.writers
	var keep, start []*writer
	for _, rw := range cfg.RemoteWrite {
		if i := slices.IndexFunc(old, func(w *writer) bool { return reflect.DeepEqual(w.cfg, rw) && slices.Equal(w.external, ext) }); i >= 0 {
			keep = append(keep, old[i])
			old = slices.Delete(old, i, i+1)
			continue
		}
		w, err := m.newWriter(rw, ext)
		if err != nil {
			m.logger.Error("Cannot set up remote write; its samples will not be sent", "url", label(rw.URL), "err", writerPolicy(rw).Error(err))
			continue
		}
		start = append(start, w)
	}
	m.writers = append(keep, start...)
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, w := range old {
		w.stop(ctx)
		m.metrics.forget(w.label)
	}
	for _, w := range start {
		w.start()
	}
}

// Stop gathers once more and flushes every writer until ctx ends.
func (m *Manager) Stop(ctx context.Context) {
	m.mu.Lock()
	ws := m.writers
	m.writers = nil
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { w.stop(ctx) })
	}
	wg.Wait()
}

func externalLabels(m map[string]string) []Label {
	ls := make([]Label, 0, len(m))
	for k, v := range m {
		ls = append(ls, Label{k, v})
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	return ls
}

// label is a URL for the metrics' url label and logs: no credentials, no
// query (stable across key rotations, and never a secret).
func label(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<invalid URL>"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// writer gathers every interval into its queue and sends the queue in
// order from one goroutine: samples of a series leave in the order they
// were gathered, and a batch is removed from the queue only once the
// receiver accepted it, so a failed send is retried with the same
// samples rather than skipped or reordered.
type writer struct {
	cfg      *config.RemoteWrite
	external []Label
	label    string
	client   *http.Client
	logger   *slog.Logger
	gatherer prometheus.Gatherer
	m        *metrics
	q        *queue
	// zbuf is the compressed request, reused by the one send loop.
	zbuf []byte
	// policy masks the receiver's credentials in errors: a receiver's
	// 4xx body may quote the request's headers.
	policy *redact.Policy

	cancel context.CancelFunc
	// flush, when closed, ends the gather loop and asks the send loop to
	// drain until its context ends.
	flush      chan struct{}
	gatherDone chan struct{}
	sendDone   chan struct{}
	sendCtx    context.Context
	sendCancel context.CancelFunc
}

func (m *Manager) newWriter(rw *config.RemoteWrite, ext []Label) (*writer, error) {
	client, err := promconfig.NewClientFromConfig(rw.HTTPClientConfig, "remote_write")
	if err != nil {
		return nil, err
	}
	label := label(rw.URL)
	w := &writer{
		cfg: rw, external: ext, label: label, client: client, gatherer: m.gatherer, m: m.metrics,
		logger: m.logger.With("url", label), q: newQueue(rw.QueueConfig.Capacity), policy: writerPolicy(rw),
	}
	w.m.capacity.WithLabelValues(label).Set(float64(rw.QueueConfig.Capacity))
	w.m.sent.WithLabelValues(label)
	w.m.failed.WithLabelValues(label)
	for _, r := range []string{"queue_full", "rejected"} {
		w.m.dropped.WithLabelValues(label, r)
	}
	return w, nil
}

func (w *writer) start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.sendCtx, w.sendCancel = context.WithCancel(context.Background())
	w.flush = make(chan struct{})
	w.gatherDone, w.sendDone = make(chan struct{}), make(chan struct{})
	go w.gatherLoop(ctx)
	go w.sendLoop()
}

// stop gathers a last time, then lets the send loop drain the queue
// until ctx ends.
func (w *writer) stop(ctx context.Context) {
	w.cancel()
	<-w.gatherDone
	w.gather()
	close(w.flush)
	select {
	case <-w.sendDone:
	case <-ctx.Done():
		w.sendCancel()
		<-w.sendDone
	}
	w.sendCancel()
	if n := w.q.len(); n > 0 {
		w.logger.Warn("Remote write stopped with samples unsent", "samples", n)
	}
}

func (w *writer) gatherLoop(ctx context.Context) {
	defer close(w.gatherDone)
	t := time.NewTicker(time.Duration(w.cfg.Interval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.gather()
		}
	}
}

func (w *writer) gather() {
	mfs, err := w.gatherer.Gather()
	if err != nil {
		// Partial results are still worth sending; the error is what
		// /metrics would show too.
		w.logger.Debug("Gathering for remote write was partial", "err", err)
	}
	samples := flatten(mfs, w.external, time.Now().UnixMilli())
	if dropped := w.q.push(samples); dropped > 0 {
		w.m.dropped.WithLabelValues(w.label, "queue_full").Add(float64(dropped))
	}
	w.m.queued.WithLabelValues(w.label).Set(float64(w.q.len()))
}

func (w *writer) sendLoop() {
	defer close(w.sendDone)
	qc := w.cfg.QueueConfig
	batch := make([]sample, 0, qc.MaxSamplesPerSend)
	var buf []byte
	backoff := time.Duration(qc.MinBackoff)
	failing := false
	for {
		var end uint64
		batch, end = w.q.peek(batch, qc.MaxSamplesPerSend)
		if len(batch) == 0 {
			select {
			case <-w.sendCtx.Done():
				return
			case <-w.flush:
				return // drained
			case <-w.q.wake:
			}
			continue
		}
		buf = encode(buf[:0], batch)
		err := w.send(buf)
		var rejected *rejectedError
		switch {
		case err == nil || errors.As(err, &rejected):
			if err != nil {
				// Resending what the receiver refuses would block
				// everything behind it forever.
				w.m.dropped.WithLabelValues(w.label, "rejected").Add(float64(len(batch)))
				w.logger.Error("Remote write receiver rejected samples; dropping them", "samples", len(batch), "err", w.policy.Error(err))
			} else {
				w.m.sent.WithLabelValues(w.label).Add(float64(len(batch)))
				w.m.lastSend.WithLabelValues(w.label).SetToCurrentTime()
				if failing {
					w.logger.Info("Remote write succeeding again", "queued", w.q.len())
				}
				failing = false
			}
			w.q.ack(end)
			w.m.queued.WithLabelValues(w.label).Set(float64(w.q.len()))
			backoff = time.Duration(qc.MinBackoff)
		default:
			w.m.failed.WithLabelValues(w.label).Inc()
			if !failing {
				w.logger.Error("Remote write failing; retrying with backoff, queueing up to the queue's capacity", "capacity", qc.Capacity, "err", w.policy.Error(err))
			}
			failing = true
			t := time.NewTimer(backoff)
			select {
			case <-w.sendCtx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, time.Duration(qc.MaxBackoff))
		}
	}
}

// rejectedError is an answer that retrying cannot change (HTTP 4xx but
// 429).
type rejectedError struct{ err error }

func (e *rejectedError) Error() string { return e.err.Error() }

func (w *writer) send(body []byte) error {
	ctx, cancel := context.WithTimeout(w.sendCtx, time.Duration(w.cfg.RemoteTimeout))
	defer cancel()
	w.zbuf = snappy.Encode(w.zbuf[:cap(w.zbuf)], body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(w.zbuf))
	if err != nil {
		return &rejectedError{err}
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "llm-prober/"+version.Version)
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests:
		return &rejectedError{fmt.Errorf("HTTP %s: %s", resp.Status, bytes.TrimSpace(msg))}
	default:
		return fmt.Errorf("HTTP %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
}

// writerPolicy is what is secret for a receiver: its inline credentials,
// those in files (read now, as the client reads them per request), every
// configured header value, the password in its URL and proxy URL.
func writerPolicy(rw *config.RemoteWrite) *redact.Policy {
	var secrets []string
	file := func(name string) {
		if name == "" {
			return
		}
		if b, err := os.ReadFile(name); err == nil {
			secrets = append(secrets, strings.TrimSpace(string(b)))
		}
	}
	h := rw.HTTPClientConfig
	if b := h.BasicAuth; b != nil {
		secrets = append(secrets, string(b.Password))
		file(b.PasswordFile)
		if b.Username != "" && b.Password != "" {
			secrets = append(secrets, "Basic "+base64.StdEncoding.EncodeToString([]byte(string(b.Username)+":"+string(b.Password))))
		}
	}
	if a := h.Authorization; a != nil {
		secrets = append(secrets, string(a.Credentials))
		file(a.CredentialsFile)
	}
	if o := h.OAuth2; o != nil {
		secrets = append(secrets, string(o.ClientSecret))
		file(o.ClientSecretFile)
	}
	if hh := h.HTTPHeaders; hh != nil {
		for name, hd := range hh.Headers {
			for _, v := range hd.Secrets {
				secrets = append(secrets, string(v))
			}
			for _, v := range hd.Values {
				if redact.HeaderSecret(name, v) {
					secrets = append(secrets, v)
				}
			}
			for _, f := range hd.Files {
				file(f)
			}
		}
	}
	if u, err := url.Parse(rw.URL); err == nil {
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
	}
	if u := h.ProxyURL.URL; u != nil {
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
	}
	return redact.New(nil, secrets...)
}
