package retention_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/retention"
)

// errorLineSeeds are shell output lines around the edges of the words
// that report an error.
var errorLineSeeds = []string{
	"", "error", "Error: no such file", "ERRORS", "2 errors generated.", "stderror: x",
	"errorless", "xerror", "terror", "error_count=0", "error-prone", "FAIL\tgithub.com/x/y 0.1s",
	"--- FAIL: TestX (0.00s)", "failed", "failure", "unfailed", "Panic!", "panicked", "fatal:",
	"Traceback (most recent call last):", "NullPointerException", "exception", "ok all good",
	"tr", "t", "e", "Fail", "eRrOr", "pre-fatal", "fatal_", "9fail", "fail9", "a.panic.b",
	"naïve error", "fatal\u212a", "tracebac\u212a", "errorſ", "ÿ error:",
}

func TestReportsErrorMatchesTheErrorLinePattern(t *testing.T) {
	matched := 0
	for _, line := range errorLineSeeds {
		want := retention.ErrorLine.MatchString(line)
		require.Equal(t, want, retention.ReportsError(line), "%q", line)
		if want {
			matched++
		}
	}
	// The seeds cover both answers, the Unicode folds included.
	require.Greater(t, matched, 10)
	require.Less(t, matched, len(errorLineSeeds)-10)
}

// FuzzReportsError: the scanner answers as the pattern it replaces.
func FuzzReportsError(f *testing.F) {
	for _, s := range errorLineSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if got, want := retention.ReportsError(line), retention.ErrorLine.MatchString(line); got != want {
			t.Fatalf("reportsError(%q) = %v, the pattern says %v", line, got, want)
		}
	})
}

func BenchmarkReportsError(b *testing.B) {
	lines := []string{
		"    at com.example.Service.handle(Service.java:42)",
		"drwxr-xr-x  2 user user 4096 Nov 29 10:00 internal",
		"ok  \tgithub.com/mnemos-ai/mnemos/pkg/turn\t0.412s",
		"main.go:12:2: error: undefined: x",
	}
	b.Run("scanner", func(b *testing.B) {
		for b.Loop() {
			for _, l := range lines {
				retention.ReportsError(l)
			}
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			for _, l := range lines {
				retention.ErrorLine.MatchString(l)
			}
		}
	})
}
