package probe

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

var errTestTooLong = errors.New("test line too long")

// readStep is one Read of a stepReader: its bytes (possibly none) and error.
type readStep struct {
	data string
	err  error
}

// stepReader plays its steps one per Read, then io.EOF.
type stepReader struct{ steps []readStep }

func (s *stepReader) Read(p []byte) (int, error) {
	if len(s.steps) == 0 {
		return 0, io.EOF
	}
	st := &s.steps[0]
	n := copy(p, st.data)
	st.data = st.data[n:]
	if st.data != "" {
		return n, nil
	}
	err := st.err
	s.steps = s.steps[1:]
	return n, err
}

// collectLines reads every line.
func collectLines(l *lineReader) (lines []string, err error) {
	for {
		b, err := l.line()
		if err != nil {
			return lines, err
		}
		lines = append(lines, string(b))
	}
}

func TestLineReaderEdges(t *testing.T) {
	const maxLine = 8
	x8 := strings.Repeat("x", maxLine)
	empties := func(n int) []readStep { return make([]readStep, n) }
	errBroken := errors.New("connection reset")
	for _, c := range []struct {
		name    string
		loneCR  bool
		maxBody int64
		steps   []readStep
		want    []string
		rest    string
		wantErr error
	}{
		{name: "exactly the limit, LF", steps: []readStep{{data: x8 + "\n" + x8 + "\n"}}, want: []string{x8, x8}, wantErr: io.EOF},
		{name: "exactly the limit, CRLF, lone CR mode", loneCR: true, steps: []readStep{{data: x8 + "\r\n" + x8 + "\r\n"}}, want: []string{x8, x8}, wantErr: io.EOF},
		{name: "exactly the limit, lone CR", loneCR: true, steps: []readStep{{data: x8 + "\r" + x8 + "\r"}}, want: []string{x8, x8}, wantErr: io.EOF},
		{name: "one over the limit", steps: []readStep{{data: "ok\n" + x8 + "y\n"}}, want: []string{"ok"}, wantErr: errTestTooLong},
		// Only LF ends a line here, so its CR is part of the line and of
		// what the limit counts.
		{name: "CR counts in LF mode", steps: []readStep{{data: x8 + "\r\n"}}, wantErr: errTestTooLong},
		{name: "CR kept in LF mode", steps: []readStep{{data: "a\rb\r\n"}}, want: []string{"a\rb\r"}, wantErr: io.EOF},
		{name: "over the limit without a terminator", steps: []readStep{{data: x8 + "y"}}, wantErr: errTestTooLong},
		{name: "unterminated last line left for rest", steps: []readStep{{data: "a\nbc"}}, want: []string{"a"}, rest: "bc", wantErr: io.EOF},
		{name: "CR at a read boundary then LF", loneCR: true, steps: []readStep{{data: "a\r"}, {data: "\nb\r"}, {data: "\r\n"}}, want: []string{"a", "b", ""}, wantErr: io.EOF},
		{name: "CR at a read boundary then text", loneCR: true, steps: []readStep{{data: "a\r"}, {data: "b\n"}}, want: []string{"a", "b"}, wantErr: io.EOF},
		{name: "CR at the buffer's end", loneCR: true, steps: []readStep{{data: "1234567\r"}, {data: "\n1234567\r"}, {data: "\n"}}, want: []string{"1234567", "1234567"}, wantErr: io.EOF},
		{name: "CR filling the buffer", loneCR: true, steps: []readStep{{data: x8 + "\r"}, {data: "\nab\n"}}, want: []string{x8, "ab"}, wantErr: io.EOF},
		{name: "LF of a CRLF is not an empty line", loneCR: true, steps: []readStep{{data: "a\r"}, {}, {data: "\n"}, {data: "\n"}}, want: []string{"a", ""}, wantErr: io.EOF},
		{name: "zero-byte reads in between", steps: append(append([]readStep{{data: "a"}}, empties(maxEmptyReads-1)...), readStep{data: "\nb\n"}), want: []string{"a", "b"}, wantErr: io.EOF},
		{name: "no progress", steps: append([]readStep{{data: "a\nb"}}, empties(maxEmptyReads)...), want: []string{"a"}, rest: "b", wantErr: errNoProgress},
		{name: "body exactly at the limit", maxBody: 5, steps: []readStep{{data: "ab\n"}, {data: "c\n"}}, want: []string{"ab", "c"}, wantErr: io.EOF},
		// A read that crosses the limit ends the stream: a line it
		// completed is not handed out.
		{name: "body over the limit", maxBody: 4, steps: []readStep{{data: "ab\n"}, {data: "c\nd\n"}}, want: []string{"ab"}, rest: "c\nd\n", wantErr: errBodyTooLarge},
		{name: "lines before a read error", steps: []readStep{{data: "a\nb\nc", err: errBroken}}, want: []string{"a", "b"}, rest: "c", wantErr: errBroken},
		{name: "data with io.EOF", steps: []readStep{{data: "a\nb\n", err: io.EOF}}, want: []string{"a", "b"}, wantErr: io.EOF},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLineReader(&stepReader{steps: c.steps}, maxLine, c.maxBody, c.loneCR, errTestTooLong)
			lines, err := collectLines(&l)
			if !errors.Is(err, c.wantErr) {
				t.Errorf("err %v, want %v", err, c.wantErr)
			}
			if strings.Join(lines, "|") != strings.Join(c.want, "|") || len(lines) != len(c.want) {
				t.Errorf("lines %q, want %q", lines, c.want)
			}
			// Asking again gives the same error.
			if _, err2 := l.line(); !errors.Is(err2, err) {
				t.Errorf("second call: err %v, first %v", err2, err)
			}
			if !errors.Is(err, errTestTooLong) {
				if rest := string(l.rest()); rest != c.rest {
					t.Errorf("rest %q, want %q", rest, c.rest)
				}
			}
			if len(l.buf) > maxLine+1 {
				t.Errorf("buffer grew to %d bytes, limit %d", len(l.buf), maxLine+1)
			}
		})
	}
}

// badCountReader claims more bytes than it was given room for.
type badCountReader struct{}

func (badCountReader) Read(p []byte) (int, error) { return len(p) + 1, nil }

func TestLineReaderInvalidCount(t *testing.T) {
	l := newLineReader(badCountReader{}, 16, 0, false, errTestTooLong)
	if _, err := l.line(); err == nil || !strings.Contains(err.Error(), "invalid count") {
		t.Fatalf("err %v, want an invalid count", err)
	}
	if l.bytesRead() != 0 {
		t.Errorf("counted %d bytes of an invalid read", l.bytesRead())
	}
}

// refLines splits in the way lineReader must: at LF, and with loneCR also
// at a lone CR and CRLF. rest is what follows the last terminator.
func refLines(in []byte, loneCR bool) (lines [][]byte, rest []byte) {
	for {
		i := bytes.IndexByte(in, '\n')
		if loneCR {
			i = indexEOL(in)
		}
		if i < 0 {
			return lines, in
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
}

// FuzzLineReader checks both terminator rules against refLines, however
// the input is split into reads (zero-byte reads included), and the limits.
func FuzzLineReader(f *testing.F) {
	for _, s := range []string{
		"a\nb\r\nc\rd\r\r\n\n",
		"12345678\r\n123456789\n",
		"x\r",
		"\r\n\r\n\n\r",
	} {
		f.Add([]byte(s), uint8(3), true)
		f.Add([]byte(s), uint8(5), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint8, loneCR bool) {
		const maxLine = 8
		var steps []readStep
		rest := in
		for i := 0; len(rest) > 0; i++ {
			n := min(len(rest), 1+(int(seed)+i*7)%5)
			if (int(seed)+i)%4 == 0 {
				steps = append(steps, readStep{}) // a zero-byte read
			}
			steps = append(steps, readStep{data: string(rest[:n])})
			rest = rest[n:]
		}
		l := newLineReader(&stepReader{steps: steps}, maxLine, 0, loneCR, errTestTooLong)
		got, err := collectLines(&l)
		want, wantRest := refLines(in, loneCR)
		for i, w := range want {
			if len(w) > maxLine {
				if !errors.Is(err, errTestTooLong) || len(got) != i {
					t.Fatalf("line %d is %d bytes: got %d lines, err %v; want %d lines and too long", i, len(w), len(got), err, i)
				}
				return
			}
			if i >= len(got) || got[i] != string(w) {
				t.Fatalf("lines %q, want %q (err %v)", got, want, err)
			}
		}
		if len(wantRest) > maxLine {
			if !errors.Is(err, errTestTooLong) {
				t.Fatalf("unterminated %d-byte tail: err %v, want too long", len(wantRest), err)
			}
			return
		}
		if !errors.Is(err, io.EOF) || len(got) != len(want) {
			t.Fatalf("lines %q, want %q; err %v", got, want, err)
		}
		if gotRest := string(l.rest()); gotRest != string(wantRest) {
			t.Fatalf("rest %q, want %q", gotRest, wantRest)
		}
		if l.bytesRead() != int64(len(in)) {
			t.Fatalf("read %d bytes of %d", l.bytesRead(), len(in))
		}
	})
}
