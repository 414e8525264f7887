package probe

import (
	"bytes"
	"errors"
	"io"
	"time"
)

// errNDJSONLineTooLong: one NDJSON line exceeds MaxLineBytes (a protocol
// error, like an oversized SSE line).
var errNDJSONLineTooLong = errors.New("NDJSON line exceeds the maximum line size")

// ndjsonReader splits a newline-delimited JSON stream (Ollama's streaming
// format) into its non-blank lines as they arrive, each timestamped as the
// line reader says. Only LF ends a line, so a CR inside one is data.
type ndjsonReader struct {
	lineReader
	// unterminated is set when the line last returned was cut by the end
	// of the stream rather than ended by a newline.
	unterminated bool
}

func newNDJSONReader(r io.Reader, maxLine int, maxBody int64) *ndjsonReader {
	return &ndjsonReader{lineReader: newLineReader(r, maxLine, maxBody, false, errNDJSONLineTooLong)}
}

// next returns the next non-blank line, without its LF or CRLF, and when it
// arrived. The slice aliases the read buffer and is valid until the next
// call. Errors: io.EOF at the end of the stream, errNDJSONLineTooLong,
// errBodyTooLarge, errNoProgress, or the underlying reader's error. A last
// line without a newline is returned (with unterminated set) before EOF.
func (n *ndjsonReader) next() ([]byte, time.Time, error) {
	for {
		line, err := n.line()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if last := n.rest(); !isBlank(last) {
					n.unterminated = true
					return bytes.TrimSuffix(last, []byte{'\r'}), n.at, nil
				}
			}
			return nil, time.Time{}, err
		}
		if line = bytes.TrimSuffix(line, []byte{'\r'}); !isBlank(line) {
			return line, n.at, nil
		}
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
