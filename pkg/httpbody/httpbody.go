// Package httpbody reads a request's body whole, in one buffer of its
// declared length where it has one: the proxy's requests, and the scripted
// upstream's, are hundreds of KiB every round, and io.ReadAll grows its
// buffer from 512 bytes, copying the body a dozen times on the way.
package httpbody

import (
	"bytes"
	"io"
)

// Read reads r to its end. length is the body's declared length (an
// http.Request's ContentLength: -1 when unknown); a length that is unknown
// or over limit gets io.ReadAll's growing buffer (the caller's reader
// enforces the limit, as http.MaxBytesReader does).
func Read(r io.Reader, length, limit int64) ([]byte, error) {
	if length <= 0 || length > limit {
		return io.ReadAll(r)
	}
	// ReadFrom keeps bytes.MinRead free before each read: with that much
	// over the length, the whole body and its EOF fit without growing.
	buf := bytes.NewBuffer(make([]byte, 0, length+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}
