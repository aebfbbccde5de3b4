package tokens

import (
	"strings"
	"testing"
)

// textKindByBranches is TextKind as first written, a branch a byte: the
// table TextKind counts from must agree with it on every text.
func textKindByBranches(s string) string {
	if len(s) < classifyMin {
		return KindProse
	}
	var symbols, spaces, b64 int
	var lower, upper, digit bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			b64++
			lower = true
		case c >= 'A' && c <= 'Z':
			b64++
			upper = true
		case c >= '0' && c <= '9':
			b64++
			symbols++
			digit = true
		case c == '+' || c == '/' || c == '=':
			b64++
			symbols++
		case c == ' ' || c == '\t':
			spaces++
		case c == '\n' || c == '\r':
		case c < 0x80:
			symbols++
		}
	}
	if spaces == 0 && lower && upper && digit && b64*100 >= len(s)*97 {
		return KindBase64
	}
	if symbols*100 >= len(s)*12 {
		return KindCode
	}
	return KindProse
}

func FuzzTextKindAgreesWithBranches(f *testing.F) {
	f.Add(strings.Repeat("The session keeps its notes. ", 12))
	f.Add(strings.Repeat("x := f(a[1], b)\n", 20))
	f.Add(strings.Repeat("QUJDZGVmMTIzNDU2Nzg5MA+/=", 12))
	f.Add(strings.Repeat("\xff\x80é\t", 80))
	f.Fuzz(func(t *testing.T, s string) {
		for _, text := range []string{s, strings.Repeat(s, classifyMin/(len(s)+1)+1)} {
			if got, want := TextKind(text), textKindByBranches(text); got != want {
				t.Fatalf("TextKind(%q) = %s, by branches %s", text, got, want)
			}
		}
	})
}

func BenchmarkTextKind(b *testing.B) {
	text := strings.Repeat("2026-11-25T10:39:21Z INFO [worker-3] job=42 status=ok took=13ms\n", 1000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if TextKind(text) != KindCode {
			b.Fatal("log output is code")
		}
	}
}
