// Package sse reads server-sent events the way a relay needs them: each
// event as its bytes came, to be written on unchanged, and its data.
package sse

import (
	"bufio"
	"bytes"
	"io"
)

// MaxEventBytes bounds one event.
const MaxEventBytes = 16 << 20

// Read reads events from r and hands each one, its lines and the blank line
// that ends it as they came, to fn. A last event without its blank line is
// handed on with one.
func Read(r io.Reader, fn func(event []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxEventBytes)
	var event []byte
	for sc.Scan() {
		line := sc.Bytes()
		event = append(append(event, line...), '\n')
		if len(line) > 0 {
			continue
		}
		if err := fn(event); err != nil {
			return err
		}
		event = event[:0]
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(bytes.TrimSpace(event)) > 0 {
		return fn(append(event, '\n'))
	}
	return nil
}

// Data is an event's data: its data lines, less "data:" and one space,
// joined by newlines; nil for an event without any (a comment, a
// keep-alive).
func Data(event []byte) []byte {
	var data [][]byte
	for line := range bytes.SplitSeq(event, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(rest, []byte(" ")))
		}
	}
	if data == nil {
		return nil
	}
	return bytes.Join(data, []byte("\n"))
}
