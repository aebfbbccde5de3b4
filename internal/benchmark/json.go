package benchmark

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
)

// The report as one JSON object (`mnemos bench --json`), the parts that
// ran and nothing else; times in milliseconds. It holds everything the
// tables need, so a stored run renders as the run itself did (Markdown,
// RenderJSON).
type (
	jsonReport struct {
		Machine   Machine         `json:"machine"`
		TookS     float64         `json:"took_s"`
		Ingest    *jsonIngest     `json:"ingest,omitempty"`
		Sustained *jsonSustained  `json:"sustained,omitempty"`
		Context   []jsonContext   `json:"context,omitempty"`
		Preflight []jsonPreflight `json:"preflight,omitempty"`
		Proxy     []jsonProxy     `json:"proxy,omitempty"`
		ProxyCost []jsonProxyCost `json:"proxy_cost,omitempty"`
		Scale     []jsonScale     `json:"scale,omitempty"`
		// ScaleRatios are the last scale step's over the first's.
		ScaleRatios *jsonScaleRatios `json:"scale_ratios,omitempty"`
	}
	jsonScale struct {
		Sessions int64   `json:"sessions"`
		Messages int64   `json:"messages"`
		FillS    float64 `json:"fill_s"`
		// TurnsPerS is the median of the step's rounds, TurnsPerSRounds
		// each round's.
		TurnsPerS       float64   `json:"turns_per_s"`
		TurnsPerSRounds []float64 `json:"turns_per_s_rounds"`
		TurnsPerRound   int       `json:"turns_per_round"`
		ContextSamples  int       `json:"context_samples"`
		P50MS           float64   `json:"context_p50_ms"`
		P99MS           float64   `json:"context_p99_ms"`
	}
	jsonScaleRatios struct {
		IngestTimePerTurn float64 `json:"ingest_time_per_turn"`
		ContextP99        float64 `json:"context_p99"`
	}
	jsonIngest struct {
		// Rounds of Turns each (EventBytes an event) from Publishers;
		// TurnsPerS is the median round's rate, and the raw baselines'
		// rates are their rounds' medians.
		Rounds           int     `json:"rounds"`
		Turns            int     `json:"turns"`
		EventBytes       int     `json:"event_bytes"`
		Publishers       int     `json:"publishers"`
		TurnsPerS        float64 `json:"turns_per_s"`
		P50MS            float64 `json:"p50_ms"`
		P99MS            float64 `json:"p99_ms"`
		RatioToPostgres  float64 `json:"ratio_to_postgres"`
		RatioToJetStream float64 `json:"ratio_to_jetstream"`
		RawJetStream     float64 `json:"raw_jetstream_msgs_per_s"`
		RawPostgres      float64 `json:"raw_postgres_rows_per_s"`
	}
	jsonSustained struct {
		Turns     int      `json:"turns"`
		TurnsPerS float64  `json:"turns_per_s"`
		P50MS     float64  `json:"p50_ms"`
		P99MS     float64  `json:"p99_ms"`
		CPU       *jsonCPU `json:"cpu,omitempty"`
	}
	// jsonCPU is where the machine's CPU went over a phase, in
	// core-seconds (CPU).
	jsonCPU struct {
		WallS       float64 `json:"wall_s"`
		BusyS       float64 `json:"busy_s"`
		ProcessS    float64 `json:"process_s"`
		PostgresS   float64 `json:"postgres_s"`
		InterruptsS float64 `json:"interrupts_s"`
		StealS      float64 `json:"steal_s"`
		OtherS      float64 `json:"other_s"`
	}
	jsonContext struct {
		Tokens      int64   `json:"tokens"`
		Samples     int     `json:"samples"`
		P50MS       float64 `json:"p50_ms"`
		P99MS       float64 `json:"p99_ms"`
		SelectP50MS float64 `json:"select_p50_ms"`
		SelectP99MS float64 `json:"select_p99_ms"`
	}
	jsonPreflight struct {
		Tokens  int64   `json:"tokens"`
		Samples int     `json:"samples"`
		P50MS   float64 `json:"p50_ms"`
		P99MS   float64 `json:"p99_ms"`
	}
	jsonProxy struct {
		// Door is DoorMessages or DoorResponses; a run stored before the
		// Responses door was timed has none, and timed the Messages door.
		Door          string   `json:"door,omitempty"`
		Tokens        int64    `json:"tokens"`
		SentTokens    [2]int64 `json:"sent_tokens"`
		SentChanged   int      `json:"sent_up_changed"`
		Samples       int      `json:"samples"`
		P50MS         float64  `json:"p50_ms"`
		P99MS         float64  `json:"p99_ms"`
		StraightP50MS float64  `json:"straight_p50_ms"`
		StraightP99MS float64  `json:"straight_p99_ms"`
		AddedP50MS    float64  `json:"added_p50_ms"`
		AddedP99MS    float64  `json:"added_p99_ms"`
		CPU           *jsonCPU `json:"cpu,omitempty"`
	}
	jsonProxyCost struct {
		Session              string  `json:"session"`
		Files                int     `json:"files"`
		Lines                int     `json:"lines"`
		CallsStraight        int     `json:"calls_straight"`
		CallsThrough         int     `json:"calls_through"`
		ReadShareStraight    float64 `json:"read_share_straight"`
		ReadShareThrough     float64 `json:"read_share_through"`
		PricedStraight       float64 `json:"priced_input_straight"`
		PricedThrough        float64 `json:"priced_input_through"`
		PricedRatio          float64 `json:"priced_input_ratio"`
		LargestStraight      int64   `json:"largest_request_straight"`
		LargestThrough       int64   `json:"largest_request_through"`
		AutoCompactThreshold int64   `json:"autocompact_threshold"`
	}
)

// JSON writes the report as one JSON object.
func (r Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.summary())
}

// RenderJSON reads a report `mnemos bench --json` wrote and writes its
// tables, as the run would have printed them.
func RenderJSON(in io.Reader, out io.Writer) error {
	var s jsonReport
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return fmt.Errorf("benchmark: reading a report: %w", err)
	}
	if s.Machine.CPUs == 0 {
		return errors.New("benchmark: reading a report: no machine in it; want the output of mnemos bench --json")
	}
	s.markdown(out)
	return nil
}

// summary is the report as its JSON holds it: the percentiles, medians
// and ratios of what was measured.
func (r Report) summary() jsonReport {
	out := jsonReport{Machine: r.Machine, TookS: r.Took.Seconds()}
	if len(r.Burst) > 0 {
		var p50, p99 []float64
		for _, b := range r.Burst {
			p50, p99 = append(p50, ms(Percentile(b.Latencies, 50))), append(p99, ms(Percentile(b.Latencies, 99)))
		}
		t := r.Throughput()
		js, pg := Median(r.RawJetStream), Median(r.RawPostgres)
		out.Ingest = &jsonIngest{Rounds: len(r.Burst), Turns: r.Burst[0].Turns, EventBytes: r.Burst[0].EventBytes, Publishers: r.Publishers,
			TurnsPerS: t, P50MS: Median(p50), P99MS: Median(p99),
			RatioToPostgres: t / pg, RatioToJetStream: t / js, RawJetStream: js, RawPostgres: pg}
		out.Sustained = &jsonSustained{Turns: r.Sustained.Turns, TurnsPerS: r.Sustained.Offered,
			P50MS: ms(Percentile(r.Sustained.Latencies, 50)), P99MS: ms(Percentile(r.Sustained.Latencies, 99))}
		out.Sustained.CPU = cpuJSON(r.Sustained.CPU, r.Sustained.HasCPU)
	}
	for _, c := range r.Context {
		out.Context = append(out.Context, jsonContext{Tokens: c.Tokens, Samples: len(c.Assemble),
			P50MS: ms(Percentile(c.Assemble, 50)), P99MS: ms(Percentile(c.Assemble, 99)),
			SelectP50MS: ms(Percentile(c.Select, 50)), SelectP99MS: ms(Percentile(c.Select, 99))})
	}
	for _, p := range r.Preflight {
		out.Preflight = append(out.Preflight, jsonPreflight{Tokens: p.Tokens, Samples: len(p.Latencies),
			P50MS: ms(Percentile(p.Latencies, 50)), P99MS: ms(Percentile(p.Latencies, 99))})
	}
	for _, p := range r.Proxy {
		t50, t99, s50, s99 := p.percentiles()
		out.Proxy = append(out.Proxy, jsonProxy{Door: p.Door, Tokens: p.Tokens, SentTokens: p.Sent, SentChanged: p.Differed, Samples: len(p.Through),
			P50MS: t50, P99MS: t99, StraightP50MS: s50, StraightP99MS: s99, AddedP50MS: t50 - s50, AddedP99MS: t99 - s99,
			CPU: cpuJSON(p.CPU, p.HasCPU)})
	}
	for _, c := range r.ProxyCost {
		ps, pt := upstream.PricedInput(c.Straight), upstream.PricedInput(c.Through)
		out.ProxyCost = append(out.ProxyCost, jsonProxyCost{Session: c.Name, Files: c.Files, Lines: c.Lines,
			CallsStraight: c.CallsStraight, CallsThrough: c.CallsThrough,
			ReadShareStraight: upstream.ReadShare(c.Straight), ReadShareThrough: upstream.ReadShare(c.Through),
			PricedStraight: ps, PricedThrough: pt, PricedRatio: pt / ps,
			LargestStraight: c.LargestStraight, LargestThrough: c.LargestThrough, AutoCompactThreshold: c.Threshold})
	}
	for _, st := range r.Scale {
		out.Scale = append(out.Scale, jsonScale{Sessions: st.Sessions, Messages: st.Messages, FillS: st.Fill.Seconds(), TurnsPerS: st.Rate(), TurnsPerSRounds: st.Rates(),
			TurnsPerRound: st.Ingest[0].Turns, ContextSamples: len(st.Context), P50MS: ms(Percentile(st.Context, 50)), P99MS: ms(Percentile(st.Context, 99))})
	}
	if len(r.Scale) > 1 {
		ingest, p99 := r.ScaleRatios()
		out.ScaleRatios = &jsonScaleRatios{IngestTimePerTurn: ingest, ContextP99: p99}
	}
	return out
}

// seconds is d in seconds to the hundredth, the precision of /proc's CPU
// times.
func seconds(d time.Duration) float64 {
	return float64(d.Round(10*time.Millisecond).Milliseconds()) / 1000
}

// cpuJSON is c for the report, nil when it was not measured.
func cpuJSON(c CPU, ok bool) *jsonCPU {
	if !ok {
		return nil
	}
	return &jsonCPU{WallS: seconds(c.Wall), BusyS: seconds(c.Busy), ProcessS: seconds(c.Process),
		PostgresS: seconds(c.Postgres), InterruptsS: seconds(c.Interrupts), StealS: seconds(c.Steal), OtherS: seconds(c.Other)}
}
