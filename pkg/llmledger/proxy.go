package llmledger

import (
	"context"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// Round is one of the agent's rounds the proxy relayed, as the ledger
// prices it: what went up and what the upstream reported, and what the
// client sent.
type Round struct {
	Tenant string
	// Session is the thread the round belongs to (a Mnemos session); ""
	// when it names none.
	Session string
	// Provider is the door's provider ("anthropic", "openai").
	Provider string
	Model    string
	// Usage is the upstream's usage of the request sent up.
	Usage llm.Usage
	// Changed reports that the request sent up is not the client's bytes;
	// SentBytes and ClientBytes are the sizes of the two bodies.
	Changed                bool
	SentBytes, ClientBytes int64
	// Continues reports that the client's request holds its thread's
	// previous request as its prefix (the proxy's outcome "managed").
	Continues bool
	// Caches reports that the client's request, sent straight, would
	// write the prompt cache: it marks a cache breakpoint (the Messages
	// API), or its upstream caches every prefix on its own (OpenAI's).
	Caches bool
	// At is when the upstream answered.
	At time.Time
}

// Priced is a round's cost through Mnemos and straight.
type Priced struct {
	Through, Straight llm.USD
	// StraightUsage is the usage the round is priced at straight.
	StraightUsage llm.Usage
	// Known is false when no price table knows the round's model: it is
	// recorded at no cost either way.
	Known bool
}

// Savings is what the round saved: straight less through (negative when
// it cost more through Mnemos).
func (p Priced) Savings() llm.USD { return p.Straight - p.Through }

// CacheLifetime is how long the straight run's last request is taken to
// stay in the prompt cache: Anthropic's default lifetime, 5 minutes (a
// read renews it).
const CacheLifetime = 5 * time.Minute

// StraightUsage is the usage of r's request had the client sent it
// straight, the straight run's previous request of the thread being prev:
//
//   - A request Mnemos sent up unchanged is its own straight run: its
//     usage as the upstream reported it.
//   - Else its input is the upstream's count of what went up (fresh,
//     cache read and cache written) scaled by the client's body's bytes
//     over the sent body's: the same tokens per byte on both sides.
//   - Of that input, a request that caches (Round.Caches) and continues
//     its thread within CacheLifetime of the thread's previous round reads
//     what the straight run's previous request held (prev.Tokens, at most
//     its whole input): the client's requests only grow, so straight the
//     previous request is this one's prefix. Another that caches (a new
//     thread, a branch, the client's own compaction, a resend) reads what
//     the upstream read of this round. The rest is written to the cache;
//     a request that does not cache reads nothing and pays its whole
//     input at the input price.
//   - Output is the same.
func StraightUsage(r Round, prev store.StraightPrefix) llm.Usage {
	u := r.Usage
	if !r.Changed || r.SentBytes <= 0 || r.ClientBytes <= 0 {
		return u
	}
	in := scaled(u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens, r.ClientBytes, r.SentBytes)
	s := llm.Usage{OutputTokens: u.OutputTokens}
	if !r.Caches {
		s.InputTokens = in
		return s
	}
	switch warm := !prev.At.IsZero() && r.At.Sub(prev.At) <= CacheLifetime; {
	case r.Continues && warm:
		s.CacheReadTokens = min(prev.Tokens, in)
	default:
		s.CacheReadTokens = min(u.CacheReadTokens, in)
	}
	s.CacheWriteTokens = in - s.CacheReadTokens
	return s
}

// scaled is n × num / den, rounded to the nearest token, without
// overflow for any real request (n below 10⁹ tokens, bodies below 2³²
// bytes).
func scaled(n, num, den int64) int64 {
	if n <= 0 {
		return 0
	}
	return (n*num + den/2) / den
}

// RecordRound prices r by its tenant's prices (Price) and adds it to the
// tenant's day under the task "proxy" and, when it names a session the
// tenant holds, to that session's sums, beside what it would have cost
// straight (StraightUsage, from the thread's previous round as recorded).
// Rounds of one thread are to be recorded in the order they were answered.
func (l *Ledger) RecordRound(ctx context.Context, r Round) (Priced, error) {
	price, known, err := l.Price(ctx, r.Tenant, r.Model)
	if err != nil {
		return Priced{}, fmt.Errorf("llmledger.RecordRound: %w", err)
	}
	at := r.At
	if at.IsZero() {
		at = l.now()
	}
	r.At = at
	var out Priced
	err = l.store.AddProxyRound(ctx, r.Tenant, r.Session, func(prev store.StraightPrefix) store.PricedRound {
		su := StraightUsage(r, prev)
		out = Priced{StraightUsage: su, Known: known}
		if known {
			out.Through, out.Straight = price.Cost(r.Usage), price.Cost(su)
		}
		u := r.Usage
		return store.PricedRound{
			Usage: store.LLMUsage{
				Day: at.UTC(), Task: store.TaskProxy, Provider: r.Provider, Model: r.Model,
				InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens,
				CostNanoUSD: int64(out.Through), StraightNanoUSD: int64(out.Straight),
			},
			StraightInput: su.InputTokens + su.CacheReadTokens + su.CacheWriteTokens,
		}
	})
	if err != nil {
		return Priced{}, fmt.Errorf("llmledger.RecordRound: %w", err)
	}
	return out, nil
}

// AllowAgent refuses the agent's next round when what the tenant's calls
// cost today, Mnemos's own and the agent's proxied rounds together, has
// reached its daily budget of money (llm.daily_budget_usd), with an error
// wrapping llm.ErrBudgetExhausted. The token budget bounds Mnemos's own
// calls only. As with Allow, the round that crosses the budget goes
// through: what it costs is known only after it.
func (l *Ledger) AllowAgent(ctx context.Context, tenant string) error {
	set, err := l.settings.For(ctx, tenant)
	if err != nil {
		return fmt.Errorf("llmledger.AllowAgent: %w", err)
	}
	if set.LLM.DailyBudgetUSD <= 0 {
		return nil
	}
	_, cost, err := l.store.LLMSpentOnDay(ctx, tenant, l.now())
	if err != nil {
		return fmt.Errorf("llmledger.AllowAgent: %w", err)
	}
	return Check(tenant, tenantcfg.LLM{DailyBudgetUSD: set.LLM.DailyBudgetUSD}, 0, llm.USD(cost))
}
