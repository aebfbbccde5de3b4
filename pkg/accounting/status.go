package accounting

import (
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Limits returns the thresholds that apply to a session under cfg.
func Limits(cfg tokens.Config, s sessionstate.Session) tokens.Limits {
	return cfg.Limits(s.Model, s.ContextWindow, s.MaxOutputTokens)
}

// TallyOf is the count rule's state stored with a session.
func TallyOf(s sessionstate.Session) tokens.Tally {
	return tokens.Tally{Baseline: s.BaselineTokens, HasUsage: s.HasUsage, Pending: s.PendingTokens, PendingDense: s.PendingDense,
		Factor: s.EstimateFactor, DenseFactor: s.DenseFactor, Prefix: s.PrefixTokens}
}

// Status describes count under limits.
func Status(l tokens.Limits, count int64) events.Tokens {
	return events.Tokens{
		Count:       count,
		State:       string(l.State(count)),
		PercentLeft: l.PercentLeft(count),
		Window:      l.Window,
		Effective:   l.Effective,
		Warning:     l.Warning,
		Error:       l.Error,
		AutoCompact: l.AutoCompact,
		Blocking:    l.Blocking,
	}
}

// Preflight is the answer to "may I send these messages next?".
type Preflight struct {
	events.Tokens
	// CompactFirst: auto-compaction must run before this call.
	CompactFirst bool `json:"compact_first"`
	// Blocked: the call would reach the blocking limit.
	Blocked bool `json:"blocked"`
	// CompactionInFlight: a compaction was requested and has not finished.
	CompactionInFlight bool `json:"compaction_in_flight"`
}

// PreflightFor counts a session as it would be with msgs added (after the
// same offload the accountant would apply), and decides as the accountant would.
func PreflightFor(cfg tokens.Config, off Offload, s sessionstate.Session, msgs []turn.Message) Preflight {
	return PreflightForTurns(cfg, off, s, [][]turn.Message{msgs})
}

// PreflightForTurns is PreflightFor for messages the accountant will apply
// as several turns: each turn's tool results are offloaded on their own, as
// the accountant offloads them, so results that share no turn never add up
// to a turn's cap (Offload.TurnCapChars).
func PreflightForTurns(cfg tokens.Config, off Offload, s sessionstate.Session, turns [][]turn.Message) Preflight {
	f, _ := forecast(cfg, off, s, Request{}, 0, turns) // no prefix: cannot fail
	return f.Preflight(f.Count)
}

// PreflightWith is PreflightFor for a request that may name a model, a
// prefix or a client compaction (see Start); contextEstimate is the
// estimate of the session's context, read when req.ModelChanged. The session
// takes req's model after Start. An error is a prefix of the wrong shape.
func PreflightWith(cfg tokens.Config, off Offload, s sessionstate.Session, req Request, contextEstimate int64, msgs []turn.Message) (Preflight, error) {
	f, err := ForecastWith(cfg, off, s, req, contextEstimate, msgs)
	if err != nil {
		return Preflight{}, err
	}
	return f.Preflight(f.Count), nil
}

// Forecast is a preflight's count and what it is made of: the part a
// response measured and the parts that are estimates, which an exact count
// may replace (see docs/token-accounting.md, "Exact preflights").
type Forecast struct {
	// Count is the session's count with the request's messages added.
	Count int64
	// Measured is the last response's input side and output, when the
	// session has a response since its last compaction (HasUsage); the rest
	// of Count is estimated.
	Measured int64
	HasUsage bool
	// Prefix is the system prompt and tools as counted before any
	// response (the client's figure or an estimate), PrefixHash the hash
	// they go by; 0 when a response measured them or none is known.
	Prefix     int64
	PrefixHash string
	// Stored is the estimate, calibrated, of the messages the session
	// stored after its last response; New that of the request's messages,
	// as counted: Shown, the messages after the offload the accountant
	// would apply.
	Stored, New int64
	Shown       []turn.Message

	limits             tokens.Limits
	compacts           bool
	compactionInFlight bool
}

// Estimated is the part of Count that no response measured.
func (f Forecast) Estimated() int64 { return f.Count - f.Measured }

// Preflight is the decision on count, which is f.Count or an exact figure
// in its place.
func (f Forecast) Preflight(count int64) Preflight {
	return Preflight{
		Tokens:             Status(f.limits, count),
		CompactFirst:       f.limits.AboveAutoCompact(count) && f.compacts,
		Blocked:            count >= f.limits.Blocking,
		CompactionInFlight: f.compactionInFlight,
	}
}

// ForecastWith counts as PreflightWith does and says how the count is made.
func ForecastWith(cfg tokens.Config, off Offload, s sessionstate.Session, req Request, contextEstimate int64, msgs []turn.Message) (Forecast, error) {
	return forecast(cfg, off, s, req, contextEstimate, [][]turn.Message{msgs})
}

// forecast is ForecastWith for the messages of turns, offloaded turn by turn.
func forecast(cfg tokens.Config, off Offload, s sessionstate.Session, req Request, contextEstimate int64, turns [][]turn.Message) (Forecast, error) {
	tally := TallyOf(s)
	if err := Start(&tally, &s, req, contextEstimate); err != nil {
		return Forecast{}, err
	}
	if req.Model != "" {
		s.Model = req.Model
	}
	noneFrozen := func(string) (string, bool, error) { return "", false, nil }
	placeholder := func(string) string { return "pending" }
	stored := tally.Scaled()
	var shown []turn.Message
	for _, msgs := range turns {
		msgs, _, _ = off.Apply(msgs, noneFrozen, placeholder) // cannot fail without a lookup
		for _, m := range msgs {
			tally.AddMessage(m)
		}
		shown = append(shown, msgs...)
	}
	f := Forecast{
		Count: tally.Count(), HasUsage: tally.HasUsage, Stored: stored, New: tally.Scaled() - stored, Shown: shown,
		limits: Limits(cfg, s), compacts: s.AutoCompactEnabled, compactionInFlight: s.CompactionInFlight,
	}
	switch {
	case tally.HasUsage:
		f.Measured = tally.Baseline
	case tally.Prefix > 0:
		f.Prefix, f.PrefixHash = tally.Prefix, s.PrefixHash
	}
	return f, nil
}
