package sse_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/sse"
)

func TestReadKeepsBytes(t *testing.T) {
	t.Parallel()
	stream := "event: a\ndata: 1\n\n: comment\n\ndata: 2"
	var got bytes.Buffer
	var data []string
	require.NoError(t, sse.Read(strings.NewReader(stream), func(ev []byte) error {
		got.Write(ev)
		data = append(data, string(sse.Data(ev)))
		return nil
	}))
	require.Equal(t, stream+"\n\n", got.String())
	require.Equal(t, []string{"1", "", "2"}, data)
	require.Nil(t, sse.Data([]byte(": keep-alive\n\n")))
	require.Equal(t, "a\nb", string(sse.Data([]byte("data:a\r\ndata: b\r\n\r\n"))))
}
