package recall

import (
	"context"
	"fmt"
	"testing"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// BenchmarkBuiltinSelector: one selection by the builtin over a full list of
// 200 candidates, from the request the Recaller writes to the answer.
func BenchmarkBuiltinSelector(b *testing.B) {
	topics := []string{"staging database", "deploy window", "billing service", "search index", "auth tokens", "release notes", "CI cache", "feature flags"}
	var cands []Candidate
	for i := range 200 {
		t := topics[i%len(topics)]
		cands = append(cands, cand("project:repo-x", fmt.Sprintf("note-%03d", i), memory.TypeProject,
			fmt.Sprintf("How the %s behaves under load, observation %d, and what to check first", t, i)))
	}
	req := request("acme", "", "can you run the migration on the staging database before the deploy window?", []string{"Bash", "Read"}, cands, 5, testNow)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Builtin(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
