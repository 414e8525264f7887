package probe

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

type wantEvent struct {
	typ, data string
	errData   *string
}

func strp(s string) *string { return &s }

// collect reads every event; it returns them and the final error.
func collect(r *sseReader) ([]wantEvent, error) {
	var out []wantEvent
	for {
		ev, err := r.next()
		if err != nil {
			return out, err
		}
		w := wantEvent{typ: string(ev.Type), data: string(ev.Data)}
		if ev.ErrorData != nil {
			w.errData = strp(string(ev.ErrorData))
		}
		out = append(out, w)
	}
}

func equalEvents(a, b []wantEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].typ != b[i].typ || a[i].data != b[i].data || (a[i].errData == nil) != (b[i].errData == nil) ||
			(a[i].errData != nil && *a[i].errData != *b[i].errData) {
			return false
		}
	}
	return true
}

// splitReader returns the input in pieces of random size.
type splitReader struct {
	data []byte
	rng  *rand.Rand
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := 1 + s.rng.IntN(min(len(s.data), len(p), 7))
	copy(p, s.data[:n])
	s.data = s.data[n:]
	return n, nil
}

func TestSSEParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []wantEvent
		wantErr error
	}{
		{"basic", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []wantEvent{{data: `{"a":1}`}, {data: "[DONE]"}}, io.EOF},
		{"crlf", "data: x\r\n\r\ndata: y\r\n\r\n", []wantEvent{{data: "x"}, {data: "y"}}, io.EOF},
		{"lone cr", "data: x\r\rdata: y\r\r", []wantEvent{{data: "x"}, {data: "y"}}, io.EOF},
		{"mixed endings", "data: a\r\n\ndata: b\n\r\ndata: c\r\r\n", []wantEvent{{data: "a"}, {data: "b"}, {data: "c"}}, io.EOF},
		{"comments", ": ping\n\n:\ndata: x\n: inside\n\n", []wantEvent{{data: "x"}}, io.EOF},
		{"multi-line data", "data: a\ndata: b\ndata:\ndata: c\n\n", []wantEvent{{data: "a\nb\n\nc"}}, io.EOF},
		{"keep-alive blanks", "\n\n\n\ndata: x\n\n\n\n", []wantEvent{{data: "x"}}, io.EOF},
		{"no space after colon", "data:x\n\ndata:  two\n\n", []wantEvent{{data: "x"}, {data: " two"}}, io.EOF},
		{"empty data dispatches", "data\n\ndata:\n\n", []wantEvent{{}, {}}, io.EOF},
		{"event and id", "event: error\nid: 7\nretry: 100\ndata: boom\n\ndata: after\n\n", []wantEvent{{typ: "error", data: "boom"}, {data: "after"}}, io.EOF},
		{"event type reset without data", "event: x\n\ndata: y\n\n", []wantEvent{{data: "y"}}, io.EOF},
		{"unknown fields ignored", "foo: bar\nbaz\ndata: x\n\n", []wantEvent{{data: "x"}}, io.EOF},
		{"llama.cpp error line", "error: {\"code\":500}\n\ndata: [DONE]\n\n", []wantEvent{{errData: strp(`{"code":500}`)}, {data: "[DONE]"}}, io.EOF},
		{"trailing partial event dropped", "data: x\n\ndata: partial", []wantEvent{{data: "x"}}, io.EOF},
		{"trailing event without blank dropped", "data: x\n\ndata: y\n", []wantEvent{{data: "x"}}, io.EOF},
		{"non-utf8 passes through", "data: \xff\xfe\n\n", []wantEvent{{data: "\xff\xfe"}}, io.EOF},
		{"line too long", "data: ok\n\ndata: " + strings.Repeat("x", 100) + "\n\n", []wantEvent{{data: "ok"}}, errLineTooLong},
		{"event too long", "data: ok\n\n" + strings.Repeat("data: 0123456789\n", 10) + "\n", []wantEvent{{data: "ok"}}, errEventTooLong},
	}
	for _, tt := range tests {
		readers := map[string]func() io.Reader{
			"whole":    func() io.Reader { return strings.NewReader(tt.in) },
			"one-byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(tt.in)) },
			"random":   func() io.Reader { return &splitReader{data: []byte(tt.in), rng: rand.New(rand.NewPCG(1, 2))} },
			"data-err": func() io.Reader { return iotest.DataErrReader(strings.NewReader(tt.in)) },
		}
		for mode, mk := range readers {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				got, err := collect(newSSEReader(mk(), 64, 0))
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("error = %v, want %v", err, tt.wantErr)
				}
				if !equalEvents(got, tt.want) {
					t.Errorf("events = %+v, want %+v", got, tt.want)
				}
			})
		}
	}
}

func TestSSEBodyLimit(t *testing.T) {
	in := strings.Repeat("data: 0123456789\n\n", 100)
	got, err := collect(newSSEReader(iotest.OneByteReader(strings.NewReader(in)), 64, 180))
	if !errors.Is(err, errBodyTooLarge) {
		t.Fatalf("error = %v, want errBodyTooLarge", err)
	}
	if len(got) != 10 {
		t.Errorf("got %d events before the limit, want 10", len(got))
	}
}

func TestSSENoProgress(t *testing.T) {
	_, err := collect(newSSEReader(zeroReader{}, 64, 0))
	if !errors.Is(err, errNoProgress) {
		t.Fatalf("error = %v, want errNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// scriptedReader returns one piece per Read and records when each Read
// was called and when it returned.
type scriptedReader struct {
	pieces          []string
	called, returns []time.Time
}

func (s *scriptedReader) Read(p []byte) (int, error) {
	s.called = append(s.called, time.Now())
	if len(s.pieces) == 0 {
		s.returns = append(s.returns, time.Now())
		return 0, io.EOF
	}
	time.Sleep(2 * time.Millisecond) // make consecutive reads distinguishable
	n := copy(p, s.pieces[0])
	s.pieces[0] = s.pieces[0][n:]
	if s.pieces[0] == "" {
		s.pieces = s.pieces[1:]
	}
	s.returns = append(s.returns, time.Now())
	return n, nil
}

// TestSSETiming checks that an event's time is that of the Read delivering
// its last byte: after that Read returned and before the next one began.
func TestSSETiming(t *testing.T) {
	sr := &scriptedReader{pieces: []string{
		"data: a", "bc\n", "\n", // event 0 completes in read 2
		"data: d\n\nda", "ta: e\n\n", // event 1 in read 3, event 2 in read 4
		"data: f\r", "\n\r\n", // event 3 in read 6 (the CR of read 5 is not enough)
	}}
	r := newSSEReader(sr, 64, 0)
	wantRead := []int{2, 3, 4, 6}
	for i, ri := range wantRead {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.At.Before(sr.returns[ri]) {
			t.Errorf("event %d (%q): At is before read %d returned", i, ev.Data, ri)
		}
		if ri+1 < len(sr.called) && !ev.At.Before(sr.called[ri+1]) {
			t.Errorf("event %d (%q): At is not before read %d was called", i, ev.Data, ri+1)
		}
	}
}

// loopReader serves the same bytes forever.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

func TestSSEAllocations(t *testing.T) {
	stream := []byte(": ping\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\ndata: second line\r\nevent: message\r\nid: 1\r\n\r\n")
	r := newSSEReader(&loopReader{data: stream}, 1<<20, 0)
	for range 100 { // warm up the buffers
		if _, err := r.next(); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.next(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("next allocates %.1f times per event in steady state, want 0", allocs)
	}
}

// FuzzSSE checks that the parser never panics, respects its bounds, and
// yields the same events however the input is split into reads.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		"data: x\r\n\r\n: c\r\rdata:y\r\r",
		"event: error\ndata: a\ndata: b\n\nerror: {}\n\n",
		"\xff\xfe\x00data\x00:\n\n",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint8) {
		const maxLine = 256
		whole, errWhole := collect(newSSEReader(bytes.NewReader(in), maxLine, 0))
		split, errSplit := collect(newSSEReader(&splitReader{data: in, rng: rand.New(rand.NewPCG(uint64(seed), 0))}, maxLine, 0))
		if !equalEvents(whole, split) || !errors.Is(errSplit, errWhole) && !errors.Is(errWhole, errSplit) {
			t.Fatalf("split reads differ: whole %+v (%v), split %+v (%v)", whole, errWhole, split, errSplit)
		}
		for _, ev := range whole {
			if len(ev.data) > maxLine || ev.errData != nil && len(*ev.errData) > maxLine {
				t.Fatalf("event exceeds the line limit: %d bytes", len(ev.data))
			}
		}
		// With a body limit the reader must stop at it.
		lim := newSSEReader(bytes.NewReader(in), maxLine, 100)
		_, _ = collect(lim)
		if lim.bytesRead() > 100+int64(maxLine)+1 {
			t.Fatalf("read %d bytes past a 100-byte limit", lim.bytesRead())
		}
	})
}
