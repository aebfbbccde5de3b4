package httpbody_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/httpbody"
)

// TestABodyOfKnownLengthIsReadIntoOneBuffer: a body of its declared length
// is read whole with one allocation; an unknown or too large length, and a
// body shorter or longer than declared, are still read whole.
func TestABodyOfKnownLengthIsReadIntoOneBuffer(t *testing.T) {
	body := []byte(strings.Repeat("a long session's request. ", 40_000))
	n := int64(len(body))
	r := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(20, func() {
		r.Reset(body)
		got, err := httpbody.Read(r, n, 1<<30)
		if err != nil || len(got) != len(body) {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
	})
	require.LessOrEqual(t, allocs, 1.0, "one buffer, never grown (room for the read that finds the end included)")

	for _, c := range []struct{ length, limit int64 }{{-1, 1 << 30}, {n, n - 1}, {n / 2, 1 << 30}, {n * 2, 1 << 30}} {
		got, err := httpbody.Read(io.MultiReader(bytes.NewReader(body)), c.length, c.limit)
		require.NoError(t, err)
		require.Equal(t, body, got, "length %d, limit %d", c.length, c.limit)
	}
}
