package accounting

import (
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Limits returns the thresholds that apply to a session under cfg.
func Limits(cfg tokens.Config, s store.Session) tokens.Limits {
	return cfg.Limits(s.Model, s.ContextWindow, s.MaxOutputTokens)
}

// TallyOf is the count rule's state stored with a session.
func TallyOf(s store.Session) tokens.Tally {
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
func PreflightFor(cfg tokens.Config, off Offload, s store.Session, msgs []turn.Message) Preflight {
	p, _ := PreflightWith(cfg, off, s, Request{}, 0, msgs) // no prefix: cannot fail
	return p
}

// PreflightWith is PreflightFor for a request that may name a model, a
// prefix or a client compaction (see Start); contextEstimate is the
// estimate of the session's context, read when req.ModelChanged. The session
// takes req's model after Start. An error is a prefix of the wrong shape.
func PreflightWith(cfg tokens.Config, off Offload, s store.Session, req Request, contextEstimate int64, msgs []turn.Message) (Preflight, error) {
	tally := TallyOf(s)
	if err := Start(&tally, &s, req, contextEstimate); err != nil {
		return Preflight{}, err
	}
	if req.Model != "" {
		s.Model = req.Model
	}
	l := Limits(cfg, s)
	noneFrozen := func(string) (string, bool, error) { return "", false, nil }
	placeholder := func(string) string { return "pending" }
	shown, _, _ := off.Apply(msgs, noneFrozen, placeholder) // cannot fail without a lookup
	for _, m := range shown {
		tally.AddMessage(m)
	}
	count := tally.Count()
	return Preflight{
		Tokens:             Status(l, count),
		CompactFirst:       l.AboveAutoCompact(count) && s.AutoCompactEnabled,
		Blocked:            count >= l.Blocking,
		CompactionInFlight: s.CompactionInFlight,
	}, nil
}
