package probe

import (
	"bytes"
	"errors"
	"io"
	"time"
)

// Errors of the SSE reader (besides the line reader's). Both mean the
// server broke our limits and become OutcomeProtocolError.
var (
	errLineTooLong  = errors.New("SSE line exceeds the maximum line size")
	errEventTooLong = errors.New("SSE event data exceeds the maximum line size")
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
	// line dispatching it) returned; see lineReader.
	At time.Time
}

// sseReader parses an SSE stream incrementally (WHATWG HTML "server-sent
// events" parsing rules) without allocating per line: the line reader
// splits lines at LF, CRLF or a lone CR, and the event buffers, bounded by
// maxLine like a line, are reused.
type sseReader struct {
	lineReader

	ev              sseEvent
	data, errData   []byte
	typ, id         []byte
	hasData, hasErr bool
}

func newSSEReader(r io.Reader, maxLine int, maxBody int64) *sseReader {
	return &sseReader{lineReader: newLineReader(r, maxLine, maxBody, true, errLineTooLong)}
}

// next returns the next dispatched event. Errors: io.EOF when the stream
// ended (a partial trailing event or line is discarded, as the spec says),
// errEventTooLong, the line reader's errors, or the underlying reader's.
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
			s.ev = sseEvent{Type: s.typ, Data: s.data, ID: s.id, At: s.at}
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
