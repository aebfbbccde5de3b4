package turn_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// BenchmarkDuplicateKey: the duplicate-key walk over an 8 MiB event of
// small messages, the largest event the gateway takes by default.
func BenchmarkDuplicateKey(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"schema":"mnemos.turn.v1","input_messages":[`)
	for i := 0; sb.Len() < 8<<20; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"uuid":"u%d","role":"user","content":[{"type":"text","text":"hello there, message %d"}]}`, i, i)
	}
	sb.WriteString(`]}`)
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if at, _ := turn.DuplicateKey(data); at >= 0 {
			b.Fatal("duplicate")
		}
	}
}
