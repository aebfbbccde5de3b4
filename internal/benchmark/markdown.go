package benchmark

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Markdown writes the report as tables: the machine line, then a table
// for each part that ran. It renders the report's JSON form, so a run
// stored with `mnemos bench --json` renders the same (RenderJSON).
func (r Report) Markdown(w io.Writer) { r.summary().markdown(w) }

// markdown writes the tables of a report's JSON form.
func (s jsonReport) markdown(w io.Writer) {
	m := s.Machine
	server := m.Postgres
	if m.Autovacuum == "off" {
		server += " (autovacuum off)"
	}
	commit := m.Commit
	if commit == "" {
		commit = "unknown"
	}
	fmt.Fprintf(w, "Machine: %d CPUs (%s), %s memory, %s; %s (%s); PostgreSQL %s; nats-server %s; load average %s at the start; run took %s; commit %s.\n\n",
		m.CPUs, m.CPUModel, m.Memory, m.OS, m.Go, m.GC, server, m.NATS, m.Load, secondsDuration(s.TookS).Round(time.Second), commit)

	if in, su := s.Ingest, s.Sustained; in != nil && su != nil {
		rounds := fmt.Sprintf("%d rounds", in.Rounds)
		if in.Rounds == 1 {
			rounds = "1 round"
		}
		fmt.Fprintf(w, "Ingest: %s of %d turns (%d-byte events, %d publishers), median of the rounds; then %d turns offered at %.0f/s.\n\n",
			rounds, in.Turns, in.EventBytes, in.Publishers, su.Turns, su.TurnsPerS)
		fmt.Fprintln(w, "| turns/s end to end (saturated) | ingest → accounted p50 / p99, saturated | p50 / p99 at a sustained rate | raw JetStream publish+consume | raw Postgres inserts | ratio to JetStream | ratio to Postgres |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
		fmt.Fprintf(w, "| **%s** | %s / %s ms | **%s / %s ms** at %s/s | %s msgs/s | %s rows/s | %.3f | %.3f |\n\n",
			thousands(in.TurnsPerS), decimal(in.P50MS), decimal(in.P99MS),
			decimal(su.P50MS), decimal(su.P99MS), thousands(su.TurnsPerS),
			thousands(in.RawJetStream), thousands(in.RawPostgres), in.RatioToJetStream, in.RatioToPostgres)
		if su.CPU != nil {
			fmt.Fprintf(w, "At the sustained rate, %s.\n\n", su.CPU.describe(m.CPUs))
		}
	}
	if len(s.Context) > 0 {
		fmt.Fprintf(w, "Context assembly: GET /v1/sessions/{id}/context over HTTP, and a plain SELECT of the same messages; %d samples each.\n\n", s.Context[0].Samples)
		fmt.Fprintln(w, "| session | context p50 / p99 | plain SELECT p50 / p99 | ratio of p50s |")
		fmt.Fprintln(w, "|---|---|---|---|")
		for _, c := range s.Context {
			fmt.Fprintf(w, "| %dK tokens | %s / %s ms | %s / %s ms | %.1f |\n", c.Tokens/1000,
				decimal(c.P50MS), decimal(c.P99MS), decimal(c.SelectP50MS), decimal(c.SelectP99MS), c.P50MS/c.SelectP50MS)
		}
		fmt.Fprintln(w)
	}
	if len(s.Preflight) > 0 {
		fmt.Fprintf(w, "Pre-flight: POST /v1/sessions/{id}/preflight over HTTP with the next round (a request, a tool call and its 3,200-byte result); %d samples each.\n\n", s.Preflight[0].Samples)
		fmt.Fprintln(w, "| session | pre-flight p50 / p99 |")
		fmt.Fprintln(w, "|---|---|")
		for _, p := range s.Preflight {
			fmt.Fprintf(w, "| %dK tokens | %s / %s ms |\n", p.Tokens/1000, decimal(p.P50MS), decimal(p.P99MS))
		}
		fmt.Fprintln(w)
	}
	s.proxyMarkdown(w)
	s.scaleMarkdown(w)
}

// doorDescriptions say how the bench's client sends a round at each door.
var doorDescriptions = map[string]string{
	DoorMessages:  "messages is POST /v1/messages as Claude Code sends it, not streamed",
	DoorResponses: "responses is POST /v1/responses as the Codex CLI sends it, streamed",
}

// door is the door p timed: the Messages door when it names none, as a
// run stored before the Responses door was timed does.
func (p jsonProxy) door() string { return cmp.Or(p.Door, DoorMessages) }

// proxyMarkdown writes the proxy's tables.
func (s jsonReport) proxyMarkdown(w io.Writer) {
	if len(s.Proxy) > 0 {
		var doors []string
		for _, p := range s.Proxy {
			if d := doorDescriptions[p.door()]; !slices.Contains(doors, d) {
				doors = append(doors, d)
			}
		}
		fmt.Fprintf(w, "Proxy: a round of a session through a door of Mnemos (managed and recorded) and the same request straight to the scripted upstream, %d samples each, interleaved, timed to the last byte of the answer; %s.\n\n",
			s.Proxy[0].Samples, strings.Join(doors, "; "))
		fmt.Fprintln(w, "| session (tokens the upstream counted) | door | through Mnemos p50 / p99 | straight p50 / p99 | added p50 / p99 |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, p := range s.Proxy {
			differed := ""
			if p.SentChanged > 0 {
				differed = fmt.Sprintf(", %d sent up changed", p.SentChanged)
			}
			fmt.Fprintf(w, "| %dK (%s–%s%s) | %s | %s / %s ms | %s / %s ms | **%s / %s ms** |\n", p.Tokens/1000,
				thousands(float64(p.SentTokens[0])), thousands(float64(p.SentTokens[1])), differed, p.door(),
				decimal(p.P50MS), decimal(p.P99MS), decimal(p.StraightP50MS), decimal(p.StraightP99MS), decimal(p.AddedP50MS), decimal(p.AddedP99MS))
		}
		fmt.Fprintln(w)
		for _, p := range s.Proxy {
			if p.CPU != nil {
				fmt.Fprintf(w, "Timing the %dK rounds at the %s door, %s.\n\n", p.Tokens/1000, p.door(), p.CPU.describe(s.Machine.CPUs))
			}
		}
	}
	if len(s.ProxyCost) > 0 {
		fmt.Fprintln(w, "What a session costs, run by the same client straight and through Mnemos, each against a prompt cache of its own; priced input is cache reads × 0.1 + cache writes × 1.25 + plain input × 1.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| session | calls | cache-read share straight / through | priced input straight / through | through ÷ straight | largest request straight / through (auto-compact threshold) |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
		for _, c := range s.ProxyCost {
			fmt.Fprintf(w, "| %s: %d files of %d lines | %d / %d | %.3f / %.3f | %s / %s | **%.2f** | %s / %s (%s) |\n",
				c.Session, c.Files, c.Lines, c.CallsStraight, c.CallsThrough, c.ReadShareStraight, c.ReadShareThrough,
				thousands(c.PricedStraight), thousands(c.PricedThrough), c.PricedRatio,
				thousands(float64(c.LargestStraight)), thousands(float64(c.LargestThrough)), thousands(float64(c.AutoCompactThreshold)))
		}
		fmt.Fprintln(w)
	}
}

// scaleMarkdown writes the scale run's table: each step, and the last
// against the first.
func (s jsonReport) scaleMarkdown(w io.Writer) {
	if len(s.Scale) == 0 {
		return
	}
	first := s.Scale[0]
	fmt.Fprintf(w, "Scale: the tenant's tables filled by COPY in steps, then vacuumed and checkpointed; at each, %d saturated ingest rounds of %d turns and %d context reads of a %dK-token session.\n\n",
		len(first.TurnsPerSRounds), first.TurnsPerRound, first.ContextSamples, scaleContextTokens/1000)
	fmt.Fprintln(w, "| sessions stored | messages stored | fill took | ingest turns/s, median (rounds) | context p50 / p99 |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, st := range s.Scale {
		rounds := make([]string, len(st.TurnsPerSRounds))
		for i, rate := range st.TurnsPerSRounds {
			rounds[i] = thousands(rate)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s (%s) | %s / %s ms |\n", thousands(float64(st.Sessions)), thousands(float64(st.Messages)),
			secondsDuration(st.FillS).Round(time.Second), thousands(st.TurnsPerS), strings.Join(rounds, ", "), decimal(st.P50MS), decimal(st.P99MS))
	}
	if s.ScaleRatios != nil {
		fmt.Fprintf(w, "\nLargest ÷ smallest: context p99 **%.2f**, ingest time per turn **%.2f**.\n", s.ScaleRatios.ContextP99, s.ScaleRatios.IngestTimePerTurn)
	}
	fmt.Fprintln(w)
}

// describe says where the CPU went, for the report's prose: "over 20.0 s,
// the machine was busy …".
func (c jsonCPU) describe(cpus int) string {
	return fmt.Sprintf("over %.1f s, the machine was busy %.1f core-seconds of %.1f: this process %.1f, Postgres %.1f, "+
		"the kernel's interrupts %.1f, steal %.1f, other processes %.1f",
		c.WallS, c.BusyS, c.WallS*float64(cpus), c.ProcessS, c.PostgresS, c.InterruptsS, c.StealS, c.OtherS)
}

// secondsDuration is a JSON field's seconds as a duration.
func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// decimal writes a latency with the precision it deserves.
func decimal(v float64) string {
	if v >= 100 {
		return thousands(v)
	}
	return fmt.Sprintf("%.1f", v)
}

// thousands writes a rate rounded, with thousands separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
