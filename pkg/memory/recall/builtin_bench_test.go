package recall

import (
	"context"
	"fmt"
	"testing"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// BenchmarkBuiltinSelector: one selection by the builtin over a full list of
// 200 candidates, the first 50 with a match (from 8 down to 0.65, the
// floor crossed at the 42nd), from the request the Recaller writes to the
// answer.
func BenchmarkBuiltinSelector(b *testing.B) {
	topics := []string{"staging database", "deploy window", "billing service", "search index", "auth tokens", "release notes", "CI cache", "feature flags"}
	var cands []Candidate
	for i := range 200 {
		t := topics[i%len(topics)]
		c := cand("project:repo-x", fmt.Sprintf("note-%03d", i), memory.TypeProject,
			fmt.Sprintf("How the %s behaves under load, observation %d, and what to check first", t, i))
		if i < 50 {
			c.Score = 8 - float64(i)*0.15
		}
		cands = append(cands, c)
	}
	req := request("acme", "", "can you run the migration on the staging database before the deploy window?", []string{"Bash", "Read"}, cands, 5, testNow)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Builtin(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
