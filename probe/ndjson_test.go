package probe

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func splitReaderFor(in []byte, seed uint8) io.Reader {
	return &splitReader{data: in, rng: rand.New(rand.NewPCG(uint64(seed), 0))}
}

type ndLine struct {
	text         string
	unterminated bool
}

func collectNDJSON(n *ndjsonReader) ([]ndLine, error) {
	var out []ndLine
	for {
		l, _, err := n.next()
		if err != nil {
			return out, err
		}
		out = append(out, ndLine{string(l), n.unterminated})
	}
}

func TestNDJSONLines(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      string
		want    []ndLine
		wantErr error
	}{
		{"basic", "{\"a\":1}\n{\"b\":2}\n", []ndLine{{`{"a":1}`, false}, {`{"b":2}`, false}}, io.EOF},
		{"crlf and blank lines", "{}\r\n\r\n  \n{}\n", []ndLine{{"{}", false}, {"{}", false}}, io.EOF},
		{"unterminated last line", "{}\n{\"x\"", []ndLine{{"{}", false}, {`{"x"`, true}}, io.EOF},
		{"trailing blank", "{}\n   ", []ndLine{{"{}", false}}, io.EOF},
		{"too long", "{}\n" + strings.Repeat("x", 40) + "\n", []ndLine{{"{}", false}}, errNDJSONLineTooLong},
		{"too long unterminated", strings.Repeat("x", 40), nil, errNDJSONLineTooLong},
		{"exactly the limit", strings.Repeat("y", 32) + "\n", []ndLine{{strings.Repeat("y", 32), false}}, io.EOF},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint8(4) {
				var r io.Reader = strings.NewReader(c.in)
				if seed > 0 {
					r = splitReaderFor([]byte(c.in), seed)
				}
				got, err := collectNDJSON(newNDJSONReader(r, 32, 0))
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("seed %d: err %v, want %v", seed, err, c.wantErr)
				}
				if len(got) != len(c.want) {
					t.Fatalf("seed %d: lines %+v, want %+v", seed, got, c.want)
				}
				for i := range got {
					if got[i] != c.want[i] {
						t.Fatalf("seed %d: line %d %+v, want %+v", seed, i, got[i], c.want[i])
					}
				}
			}
		})
	}
}

func TestNDJSONBodyLimit(t *testing.T) {
	in := strings.Repeat("{\"k\":1}\n", 100)
	n := newNDJSONReader(strings.NewReader(in), 1024, 64)
	_, err := collectNDJSON(n)
	if !errors.Is(err, errBodyTooLarge) {
		t.Fatalf("err %v", err)
	}
	if n.bytesRead() > 64+1024+1 {
		t.Fatalf("read %d bytes past the limit", n.bytesRead())
	}
}

// slowReader delivers one write per Read, after a pause.
type slowReader struct {
	parts [][]byte
	gap   time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.gap)
	n := copy(p, s.parts[0])
	s.parts[0] = s.parts[0][n:]
	if len(s.parts[0]) == 0 {
		s.parts = s.parts[1:]
	}
	return n, nil
}

// Every line is stamped with the Read that completed it, not with when
// the caller asked for it.
func TestNDJSONTimestamps(t *testing.T) {
	const gap = 20 * time.Millisecond
	r := &slowReader{parts: [][]byte{[]byte("{\"a\":"), []byte("1}\n{\"b\":2}\n"), []byte("{\"c\":3}\n")}, gap: gap}
	n := newNDJSONReader(r, 1024, 0)
	start := time.Now()
	var ats []time.Duration
	for {
		_, at, err := n.next()
		if err != nil {
			break
		}
		ats = append(ats, at.Sub(start))
		time.Sleep(3 * gap) // a slow consumer must not shift the stamps
	}
	if len(ats) != 3 {
		t.Fatalf("lines %v", ats)
	}
	if ats[0] != ats[1] {
		t.Errorf("lines of one read stamped differently: %v", ats)
	}
	if ats[0] > 2*gap+15*time.Millisecond {
		t.Errorf("first line stamped %v, completed by the second read at about %v", ats[0], 2*gap)
	}
}

func FuzzNDJSON(f *testing.F) {
	for _, s := range []string{
		"{\"a\":1}\n{\"b\":2}\n",
		"{}\r\n\r\n\n{\"x\"",
		strings.Repeat("z", 300) + "\n{}\n",
		"\xff\x00\n\n\r\n",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint8) {
		const maxLine = 256
		whole, errWhole := collectNDJSON(newNDJSONReader(bytes.NewReader(in), maxLine, 0))
		split, errSplit := collectNDJSON(newNDJSONReader(splitReaderFor(in, seed), maxLine, 0))
		if !errors.Is(errSplit, errWhole) && !errors.Is(errWhole, errSplit) {
			t.Fatalf("errors differ: whole %v split %v", errWhole, errSplit)
		}
		if len(whole) != len(split) {
			t.Fatalf("split reads differ: %+v vs %+v", whole, split)
		}
		for i := range whole {
			if whole[i] != split[i] {
				t.Fatalf("line %d differs: %+v vs %+v", i, whole[i], split[i])
			}
			if len(whole[i].text) > maxLine || strings.Contains(whole[i].text, "\n") || isBlank([]byte(whole[i].text)) {
				t.Fatalf("bad line %q", whole[i].text)
			}
		}
		// Without errors, the lines are exactly the non-blank lines.
		if errors.Is(errWhole, io.EOF) {
			var want []string
			for _, l := range strings.Split(string(in), "\n") {
				l = strings.TrimSuffix(l, "\r")
				if !isBlank([]byte(l)) {
					want = append(want, l)
				}
			}
			if len(want) != len(whole) {
				t.Fatalf("got %d lines, want %d", len(whole), len(want))
			}
			for i := range want {
				if want[i] != whole[i].text {
					t.Fatalf("line %d %q, want %q", i, whole[i].text, want[i])
				}
			}
		}
		lim := newNDJSONReader(bytes.NewReader(in), maxLine, 100)
		_, _ = collectNDJSON(lim)
		if lim.bytesRead() > 100+int64(maxLine)+1 {
			t.Fatalf("read %d bytes past a 100-byte limit", lim.bytesRead())
		}
	})
}
