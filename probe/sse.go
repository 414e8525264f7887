package probe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// Errors of the SSE reader. All of them mean the server broke the protocol
// (or our limits) and become OutcomeProtocolError.
var (
	errLineTooLong  = errors.New("SSE line exceeds the maximum line size")
	errEventTooLong = errors.New("SSE event data exceeds the maximum line size")
	errBodyTooLarge = errors.New("response body exceeds the maximum response size")
	errNoProgress   = errors.New("body reader returned no data and no error repeatedly")
)

// sseEvent is one dispatched Server-Sent Event. Its byte slices alias the
// reader's buffers and stay valid only until the next call to next.
type sseEvent struct {
	// Type is the value of the last `event:` field ("" means "message").
	Type []byte
	// Data is the event's `data:` lines joined with "\n".
	Data []byte
	// ErrorData holds llama.cpp's non-standard `error:` lines (joined like
	// data); nil when the event had none. Older llama.cpp builds report a
	// mid-stream failure this way instead of in a data line.
	ErrorData []byte
	// ID is the last event ID seen on the stream so far.
	ID []byte
	// At is when the Read that delivered the event's last byte (the blank
	// line dispatching it) returned. Because the reader only reads when no
	// complete line is buffered, every line it hands out was completed by
	// the most recent Read, so that Read's return time is the event's.
	At time.Time
}

// sseReader parses an SSE stream incrementally (WHATWG HTML "server-sent
// events" parsing rules) without allocating per line: it keeps one growing
// read buffer, bounded by maxLine, and reuses the event buffers.
type sseReader struct {
	r       io.Reader
	buf     []byte
	start   int // first unconsumed byte in buf
	end     int // end of valid data in buf
	maxLine int
	maxBody int64
	total   int64
	// skipLF is set after a line ended in CR: a LF that follows belongs to
	// the same line ending. Deciding this lazily means a lone CR at the end
	// of a read dispatches immediately instead of waiting for the next read.
	skipLF bool
	readAt time.Time
	err    error // sticky error from the underlying reader
	empty  int   // consecutive (0, nil) reads

	ev              sseEvent
	data, errData   []byte
	typ, id         []byte
	hasData, hasErr bool
}

const sseInitialBuffer = 4096

func newSSEReader(r io.Reader, maxLine int, maxBody int64) *sseReader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	return &sseReader{
		r:       r,
		buf:     make([]byte, min(sseInitialBuffer, maxLine+1)),
		maxLine: maxLine,
		maxBody: maxBody,
	}
}

// bytesRead is how many body bytes the reader has consumed so far.
func (s *sseReader) bytesRead() int64 { return s.total }

// next returns the next dispatched event. Errors: io.EOF when the stream
// ended (a partial trailing event is discarded, as the spec says), one of the
// package's protocol errors, or the underlying reader's error.
func (s *sseReader) next() (*sseEvent, error) {
	for {
		line, err := s.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if !s.hasData && !s.hasErr {
				// Keep-alive blank line or an event without data: the
				// spec drops it and resets the event type.
				s.typ = s.typ[:0]
				continue
			}
			s.ev = sseEvent{Type: s.typ, Data: s.data, ID: s.id, At: s.readAt}
			if s.hasErr {
				s.ev.ErrorData = s.errData
			}
			// The slices handed out stay valid until the next call: the
			// buffers are only truncated, and refilled after this returns.
			s.data, s.errData, s.typ = s.data[:0], s.errData[:0], s.typ[:0]
			s.hasData, s.hasErr = false, false
			return &s.ev, nil
		}
		if err := s.field(line); err != nil {
			return nil, err
		}
	}
}

// skip reads and discards one event, for exchange.drain.
func (s *sseReader) skip() error {
	_, err := s.next()
	return err
}

// field applies one non-blank line to the event being built.
func (s *sseReader) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		return s.appendValue(&s.data, &s.hasData, value)
	case "error":
		return s.appendValue(&s.errData, &s.hasErr, value)
	case "event":
		s.typ = append(s.typ[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			s.id = append(s.id[:0], value...)
		}
	}
	// "retry" only matters to reconnecting clients; other fields are
	// ignored per the spec.
	return nil
}

func (s *sseReader) appendValue(dst *[]byte, has *bool, value []byte) error {
	extra := len(value)
	if *has {
		extra++
	}
	if len(*dst)+extra > s.maxLine {
		return errEventTooLong
	}
	if *has {
		*dst = append(*dst, '\n')
	}
	*dst = append(*dst, value...)
	*has = true
	return nil
}

// line returns the next line without its terminator (LF, CRLF or lone CR).
// The slice aliases the read buffer and is valid until the next call.
func (s *sseReader) line() ([]byte, error) {
	for {
		if s.err == errBodyTooLarge {
			// Fatal at once: bytes past the limit are not interpreted.
			return nil, s.err
		}
		if s.skipLF && s.start < s.end {
			if s.buf[s.start] == '\n' {
				s.start++
			}
			s.skipLF = false
		}
		b := s.buf[s.start:s.end]
		if i := indexEOL(b); i >= 0 {
			if i > s.maxLine {
				return nil, errLineTooLong
			}
			if b[i] == '\r' {
				s.skipLF = true
			}
			s.start += i + 1
			return b[:i], nil
		}
		if len(b) > s.maxLine {
			return nil, errLineTooLong
		}
		if s.err != nil {
			return nil, s.err
		}
		s.fill()
	}
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
func (s *sseReader) fill() {
	if s.start > 0 {
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	if s.end == len(s.buf) {
		n := min(2*len(s.buf), s.maxLine+1)
		nb := make([]byte, n)
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	n, err := s.r.Read(s.buf[s.end:])
	now := time.Now()
	if n < 0 || n > len(s.buf)-s.end {
		n, err = 0, fmt.Errorf("body reader returned invalid count %d", n)
	}
	if n > 0 {
		s.readAt = now
		s.empty = 0
		s.end += n
		s.total += int64(n)
		if s.maxBody > 0 && s.total > s.maxBody {
			s.err = errBodyTooLarge
			return
		}
	} else if err == nil {
		s.empty++
		if s.empty >= 100 {
			err = errNoProgress
		}
	}
	if err != nil {
		s.err = err
	}
}
