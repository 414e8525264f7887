package probe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// errNDJSONLineTooLong: one NDJSON line exceeds MaxLineBytes (a protocol
// error, like an oversized SSE line).
var errNDJSONLineTooLong = errors.New("NDJSON line exceeds the maximum line size")

// ndjsonReader splits a newline-delimited JSON stream (Ollama's streaming
// format) into lines as they arrive. Like sseReader it allocates only when
// its buffer grows, bounds the buffer by maxLine and the whole body by
// maxBody, and timestamps every line with the return of the Read that
// delivered its last byte: it reads only when no complete line is
// buffered, so each line it hands out was completed by the latest Read.
type ndjsonReader struct {
	r       io.Reader
	buf     []byte
	start   int // first unconsumed byte in buf
	end     int // end of valid data in buf
	maxLine int
	maxBody int64
	total   int64
	readAt  time.Time
	err     error // sticky error from the underlying reader
	empty   int   // consecutive (0, nil) reads
	// unterminated is set when the line last returned was cut by the end
	// of the stream rather than ended by a newline.
	unterminated bool
}

func newNDJSONReader(r io.Reader, maxLine int, maxBody int64) *ndjsonReader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	return &ndjsonReader{
		r:       r,
		buf:     make([]byte, min(sseInitialBuffer, maxLine+1)),
		maxLine: maxLine,
		maxBody: maxBody,
	}
}

// bytesRead is how many body bytes the reader has consumed so far.
func (n *ndjsonReader) bytesRead() int64 { return n.total }

// next returns the next non-blank line, without its LF or CRLF, and when it
// arrived. The slice aliases the read buffer and is valid until the next
// call. Errors: io.EOF at the end of the stream, errNDJSONLineTooLong,
// errBodyTooLarge, errNoProgress, or the underlying reader's error. A last
// line without a newline is returned (with unterminated set) before EOF.
func (n *ndjsonReader) next() ([]byte, time.Time, error) {
	for {
		if n.err == errBodyTooLarge {
			// Fatal at once: bytes past the limit are not interpreted.
			return nil, time.Time{}, n.err
		}
		b := n.buf[n.start:n.end]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			if i > n.maxLine {
				return nil, time.Time{}, errNDJSONLineTooLong
			}
			n.start += i + 1
			line := bytes.TrimSuffix(b[:i], []byte{'\r'})
			if isBlank(line) {
				continue
			}
			return line, n.readAt, nil
		}
		if len(b) > n.maxLine {
			return nil, time.Time{}, errNDJSONLineTooLong
		}
		if n.err != nil {
			if errors.Is(n.err, io.EOF) && !isBlank(b) {
				n.start = n.end
				n.unterminated = true
				return bytes.TrimSuffix(b, []byte{'\r'}), n.readAt, nil
			}
			return nil, time.Time{}, n.err
		}
		n.fill()
	}
}

// skip reads and discards one line, for exchange.drain.
func (n *ndjsonReader) skip() error {
	_, _, err := n.next()
	return err
}

func isBlank(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return false
		}
	}
	return true
}

// fill reads once, compacting or growing the buffer first; the buffer
// never grows beyond maxLine+1 bytes, enough to see a maximal line's end.
func (n *ndjsonReader) fill() {
	if n.start > 0 {
		n.end = copy(n.buf, n.buf[n.start:n.end])
		n.start = 0
	}
	if n.end == len(n.buf) {
		nb := make([]byte, min(2*len(n.buf), n.maxLine+1))
		copy(nb, n.buf[:n.end])
		n.buf = nb
	}
	c, err := n.r.Read(n.buf[n.end:])
	now := time.Now()
	if c < 0 || c > len(n.buf)-n.end {
		c, err = 0, fmt.Errorf("body reader returned invalid count %d", c)
	}
	if c > 0 {
		n.readAt = now
		n.empty = 0
		n.end += c
		n.total += int64(c)
		if n.maxBody > 0 && n.total > n.maxBody {
			n.err = errBodyTooLarge
			return
		}
	} else if err == nil {
		n.empty++
		if n.empty >= 100 {
			err = errNoProgress
		}
	}
	if err != nil {
		n.err = err
	}
}
