package benchmark

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
)

// everyPart is a report of a run of every part, with figures chosen so
// that the tables' cells can be worked out by hand.
func everyPart() Report {
	mss := func(ms ...int) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, m := range ms {
			out[i] = time.Duration(m) * time.Millisecond
		}
		return out
	}
	round := func(rate float64) Ingest {
		return Ingest{Turns: 3_000, Rate: rate, Latencies: mss(10, 30), EventBytes: 1_500}
	}
	cpu := CPU{Wall: 20 * time.Second, Busy: 36 * time.Second, Process: 16 * time.Second, Postgres: 17 * time.Second,
		Interrupts: time.Second, Steal: 0, Other: 2 * time.Second}
	return Report{
		Machine: Machine{CPUs: 2, CPUModel: "Test CPU", Memory: "8 GiB", OS: "Debian GNU/Linux 12 (bookworm)", Go: "go1.26.8",
			Postgres: "15.20", NATS: "2.15.2", Load: "0.10 0.20 0.30", Autovacuum: "off", GC: "GOGC=400 GOMEMLIMIT=off", Commit: "0123456789ab"},
		Publishers:   8,
		Burst:        []Ingest{round(2_000), round(4_000), round(3_000)},
		RawJetStream: []float64{20_000, 30_000, 25_000},
		RawPostgres:  []float64{5_000, 7_000, 6_000},
		Sustained:    Ingest{Turns: 30_000, Rate: 1_500, Latencies: mss(4, 8), Offered: 1_500, EventBytes: 1_500, CPU: cpu, HasCPU: true},
		Context:      []ContextTiming{{Tokens: 10_000, Assemble: mss(1, 3), Select: mss(2, 4)}},
		Preflight:    []PreflightTiming{{Tokens: 150_000, Latencies: mss(1, 2)}},
		Proxy: []ProxyTiming{
			{Door: DoorMessages, Tokens: 10_000, Sent: [2]int64{10_183, 11_229}, Differed: 2, Through: mss(5, 9), Straight: mss(2, 4), CPU: cpu, HasCPU: true},
			{Door: DoorResponses, Tokens: 10_000, Sent: [2]int64{10_052, 11_090}, Through: mss(4, 12), Straight: mss(1, 3)},
		},
		ProxyCost: []ProxyCost{{Name: "short", Files: 6, Lines: 100,
			Straight: upstream.Usage{InputTokens: 1_000, CacheReadInputTokens: 9_000}, Through: upstream.Usage{InputTokens: 1_000, CacheReadInputTokens: 9_000},
			LargestStraight: 21_681, LargestThrough: 21_681, CallsStraight: 7, CallsThrough: 7, Threshold: 167_000}},
		Scale: []ScaleStep{
			{Sessions: 1_000, Messages: 106_044, Fill: 3 * time.Second, Ingest: []Ingest{round(6_000), round(7_000), round(5_000)}, Context: mss(1, 2)},
			{Sessions: 100_000, Messages: 10_012_044, Fill: 206 * time.Second, Ingest: []Ingest{round(5_000), round(6_000), round(4_000)}, Context: mss(1, 3)},
		},
		Took: 65 * time.Second,
	}
}

// TestAStoredRunRendersAsTheRunDid: the tables of a report and those
// RenderJSON makes of its JSON are the same bytes, so a page's table can
// be regenerated from a stored run.
func TestAStoredRunRendersAsTheRunDid(t *testing.T) {
	rep := everyPart()
	var direct, stored, rendered bytes.Buffer
	rep.Markdown(&direct)
	if err := rep.JSON(&stored); err != nil {
		t.Fatal(err)
	}
	if err := RenderJSON(&stored, &rendered); err != nil {
		t.Fatal(err)
	}
	if direct.String() != rendered.String() {
		t.Fatalf("rendered from the JSON:\n%s\nwant, as the run wrote it:\n%s", rendered.String(), direct.String())
	}

	// Each part's table, with the cells worked out from everyPart.
	for _, want := range []string{
		"Machine: 2 CPUs (Test CPU), 8 GiB memory, Debian GNU/Linux 12 (bookworm); go1.26.8 (GOGC=400 GOMEMLIMIT=off); PostgreSQL 15.20 (autovacuum off); nats-server 2.15.2; load average 0.10 0.20 0.30 at the start; run took 1m5s; commit 0123456789ab.\n",
		"Ingest: 3 rounds of 3000 turns (1500-byte events, 8 publishers), median of the rounds; then 30000 turns offered at 1500/s.\n",
		// median rate 3,000; p50 10 and p99 30 ms in every round; 3,000 ÷ 25,000 and ÷ 6,000.
		"| **3,000** | 10.0 / 30.0 ms | **4.0 / 8.0 ms** at 1,500/s | 25,000 msgs/s | 6,000 rows/s | 0.120 | 0.500 |\n",
		"At the sustained rate, over 20.0 s, the machine was busy 36.0 core-seconds of 40.0: this process 16.0, Postgres 17.0, the kernel's interrupts 1.0, steal 0.0, other processes 2.0.\n",
		"| 10K tokens | 1.0 / 3.0 ms | 2.0 / 4.0 ms | 0.5 |\n",
		"| 150K tokens | 1.0 / 2.0 ms |\n",
		"Proxy: a round of a session through a door of Mnemos (managed and recorded) and the same request straight to the scripted upstream, 2 samples each, interleaved, timed to the last byte of the answer; " +
			"messages is POST /v1/messages as Claude Code sends it, not streamed; responses is POST /v1/responses as the Codex CLI sends it, streamed.\n",
		"| 10K (10,183–11,229, 2 sent up changed) | messages | 5.0 / 9.0 ms | 2.0 / 4.0 ms | **3.0 / 5.0 ms** |\n",
		// 4 − 1 and 12 − 3; no request reached the upstream changed.
		"| 10K (10,052–11,090) | responses | 4.0 / 12.0 ms | 1.0 / 3.0 ms | **3.0 / 9.0 ms** |\n",
		"Timing the 10K rounds at the messages door, over 20.0 s,",
		// 9,000 × 0.1 + 1,000 = 1,900 priced either way.
		"| short: 6 files of 100 lines | 7 / 7 | 0.900 / 0.900 | 1,900 / 1,900 | **1.00** | 21,681 / 21,681 (167,000) |\n",
		"at each, 3 saturated ingest rounds of 3000 turns and 2 context reads of a 10K-token session.\n",
		"| 100,000 | 10,012,044 | 3m26s | 5,000 (5,000, 6,000, 4,000) | 1.0 / 3.0 ms |\n",
		// 6,000 ÷ 5,000 per turn; 3 ms ÷ 2 ms.
		"Largest ÷ smallest: context p99 **1.50**, ingest time per turn **1.20**.\n",
	} {
		if !strings.Contains(direct.String(), want) {
			t.Errorf("the tables lack %q; they are:\n%s", want, direct.String())
		}
	}
}

func TestRenderJSONRefusesWhatIsNotAReport(t *testing.T) {
	for name, in := range map[string]string{
		"not JSON":      "| a table |",
		"no machine":    `{"took_s": 3}`,
		"another shape": `{"machine": {"cpus": 2}, "turns": 5}`,
	} {
		if err := RenderJSON(strings.NewReader(in), &bytes.Buffer{}); err == nil {
			t.Errorf("%s: RenderJSON(%q) took it for a report", name, in)
		}
	}
}

// TestARunStoredBeforeTheResponsesDoorTimedTheMessagesDoor: a proxy row of
// a stored run that names no door renders as the Messages door's, which
// was the only one timed then.
func TestARunStoredBeforeTheResponsesDoorTimedTheMessagesDoor(t *testing.T) {
	stored := `{"machine": {"cpus": 2}, "took_s": 1, "proxy": [{"tokens": 150000, "sent_tokens": [150458, 153166], "sent_up_changed": 0, "samples": 500,
		"p50_ms": 15.9, "p99_ms": 68.1, "straight_p50_ms": 3.5, "straight_p99_ms": 24.6, "added_p50_ms": 12.4, "added_p99_ms": 43.5}]}`
	var out bytes.Buffer
	if err := RenderJSON(strings.NewReader(stored), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"timed to the last byte of the answer; messages is POST /v1/messages as Claude Code sends it, not streamed.\n",
		"| 150K (150,458–153,166) | messages | 15.9 / 68.1 ms | 3.5 / 24.6 ms | **12.4 / 43.5 ms** |\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the tables lack %q; they are:\n%s", want, out.String())
		}
	}
}
