package probe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// Errors of the line reader, shared by the SSE and NDJSON readers. Both
// mean the server broke our limits and become OutcomeProtocolError.
var (
	errBodyTooLarge = errors.New("response body exceeds the maximum response size")
	errNoProgress   = errors.New("body reader returned no data and no error repeatedly")
)

// lineReaderInitialBuffer is small enough not to matter per probe and
// large enough that ordinary chunks never make the buffer grow.
const lineReaderInitialBuffer = 4096

// maxEmptyReads is how many (0, nil) reads in a row are taken as a broken
// body reader rather than a slow one, which would block instead.
const maxEmptyReads = 100

// lineReader splits a streamed body into lines as they arrive; the SSE and
// NDJSON readers build on it. It allocates only when its buffer grows,
// bounds the buffer by maxLine and the whole body by maxBody, and records
// when each line arrived.
//
// That time is what TTFT and the token times are taken from, so its rule
// matters: the reader reads only when no complete line is buffered. Every
// line it hands out was therefore completed by the most recent Read, and
// that Read's return time (at) is the line's arrival, however late the
// caller asks for it.
type lineReader struct {
	r       io.Reader
	buf     []byte
	start   int // first unconsumed byte in buf
	end     int // end of valid data in buf
	maxLine int
	maxBody int64
	total   int64
	// loneCR makes a CR end a line by itself, as SSE wants. Otherwise only
	// LF ends a line and a CR before it stays in the line (and counts
	// toward maxLine), for the caller to trim.
	loneCR bool
	// skipLF is set after a line ended in CR: a LF that follows belongs to
	// the same line ending. Deciding this lazily means a lone CR at the end
	// of a read ends its line at once instead of waiting for the next read.
	skipLF bool
	// tooLong is returned for a line over maxLine, so each format names
	// itself in the error.
	tooLong error
	// at is the return time of the latest Read that delivered bytes.
	at time.Time
	// clock is r's own record of that time, when it keeps one (the HTTP
	// drivers' watchedBody), so the clock is read once per read.
	clock timedReader
	err   error // sticky error from the underlying reader
	empty int   // consecutive (0, nil) reads
}

// newLineReader returns a reader of r; a maxLine of zero or less means
// DefaultMaxLineBytes and a maxBody of zero or less no body limit.
func newLineReader(r io.Reader, maxLine int, maxBody int64, loneCR bool, tooLong error) lineReader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	clock, _ := r.(timedReader)
	return lineReader{
		r:       r,
		clock:   clock,
		buf:     make([]byte, min(lineReaderInitialBuffer, maxLine+1)),
		maxLine: maxLine,
		maxBody: maxBody,
		loneCR:  loneCR,
		tooLong: tooLong,
	}
}

// bytesRead is how many body bytes the reader has consumed so far.
func (l *lineReader) bytesRead() int64 { return l.total }

// line returns the next line without its terminator; it arrived at l.at.
// The slice aliases the read buffer and is valid until the next call.
// Errors: tooLong, errBodyTooLarge, errNoProgress, or the underlying
// reader's (io.EOF at the end of the stream); bytes after the last
// terminator are left for rest. Lines already buffered are handed out
// before a read error, but none after the body limit was crossed.
func (l *lineReader) line() ([]byte, error) {
	for {
		if l.err == errBodyTooLarge {
			// Fatal at once: bytes past the limit are not interpreted.
			return nil, l.err
		}
		if l.skipLF && l.start < l.end {
			if l.buf[l.start] == '\n' {
				l.start++
			}
			l.skipLF = false
		}
		b := l.buf[l.start:l.end]
		var i int
		if l.loneCR {
			i = indexEOL(b)
		} else {
			i = bytes.IndexByte(b, '\n')
		}
		if i >= 0 {
			if i > l.maxLine {
				return nil, l.tooLong
			}
			if b[i] == '\r' {
				l.skipLF = true
			}
			l.start += i + 1
			return b[:i], nil
		}
		if len(b) > l.maxLine {
			return nil, l.tooLong
		}
		if l.err != nil {
			return nil, l.err
		}
		l.fill()
	}
}

// rest consumes and returns the bytes buffered after the last complete
// line: once line has reported io.EOF, an unterminated last line. The
// slice is valid until the next call.
func (l *lineReader) rest() []byte {
	b := l.buf[l.start:l.end]
	l.start = l.end
	return b
}

// timedReader is a reader that records when its latest Read delivering
// bytes returned.
type timedReader interface {
	io.Reader
	lastRead() time.Time
}

// indexEOL finds the first CR or LF.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}

// fill reads once from the underlying reader, compacting or growing the
// buffer first. The buffer never grows beyond maxLine+1 bytes, which is
// enough to see a maximal line's terminator.
func (l *lineReader) fill() {
	if l.start > 0 {
		l.end = copy(l.buf, l.buf[l.start:l.end])
		l.start = 0
	}
	if l.end == len(l.buf) {
		nb := make([]byte, min(2*len(l.buf), l.maxLine+1))
		copy(nb, l.buf[:l.end])
		l.buf = nb
	}
	n, err := l.r.Read(l.buf[l.end:])
	var now time.Time
	if l.clock != nil {
		now = l.clock.lastRead()
	} else {
		now = time.Now()
	}
	if n < 0 || n > len(l.buf)-l.end {
		n, err = 0, fmt.Errorf("body reader returned invalid count %d", n)
	}
	if n > 0 {
		l.at = now
		l.empty = 0
		l.end += n
		l.total += int64(n)
		if l.maxBody > 0 && l.total > l.maxBody {
			l.err = errBodyTooLarge
			return
		}
	} else if err == nil {
		l.empty++
		if l.empty >= maxEmptyReads {
			err = errNoProgress
		}
	}
	if err != nil {
		l.err = err
	}
}
