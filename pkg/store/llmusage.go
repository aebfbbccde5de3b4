package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// LLMUsage is one model call's usage, or a day's sum of them.
type LLMUsage struct {
	Day              time.Time
	Task             string
	Provider         string
	Model            string
	Calls            int64
	FailedCalls      int64
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	// CostNanoUSD is what the calls cost, in nano-dollars (10⁻⁹ USD).
	CostNanoUSD int64
	// StraightNanoUSD is what the agent's proxied rounds (task "proxy")
	// would have cost sent straight to the upstream; 0 for Mnemos's own
	// calls.
	StraightNanoUSD int64
}

// TaskProxy is the task of the agent's rounds the proxy relays, in
// llm_usage beside Mnemos's own tasks.
const TaskProxy = "proxy"

// Add returns the sum of u and o (their day, task, provider and model are u's).
func (u LLMUsage) Add(o LLMUsage) LLMUsage {
	u.Calls += o.Calls
	u.FailedCalls += o.FailedCalls
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.CostNanoUSD += o.CostNanoUSD
	u.StraightNanoUSD += o.StraightNanoUSD
	return u
}

// Tokens is every token of u.
func (u LLMUsage) Tokens() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// AddLLMUsage adds one call's usage and cost to its tenant's day.
func (s *Store) AddLLMUsage(ctx context.Context, tenant string, u LLMUsage, failed bool) error {
	var f int64
	if failed {
		f = 1
	}
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		if err := tx.addLLMUsage(ctx, u, f); err != nil {
			return fmt.Errorf("store.AddLLMUsage: %w", err)
		}
		return nil
	})
}

func (t *Tx) addLLMUsage(ctx context.Context, u LLMUsage, failed int64) error {
	return t.q.LLMUsageAdd(ctx, dbsqlc.LLMUsageAddParams{
		TenantID: t.tenant, Day: pgtype.Date{Time: u.Day.UTC(), Valid: true}, Task: u.Task, Provider: u.Provider,
		Model: u.Model, Failed: failed, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, CostNanousd: u.CostNanoUSD,
		StraightNanousd: u.StraightNanoUSD,
	})
}

// StraightPrefix is what the straight run's last request of a thread held,
// in tokens, and when it was sent: what the thread's next round would read
// from the cache straight. Zero when no round of the thread was priced.
type StraightPrefix struct {
	Tokens int64
	At     time.Time
}

// PricedRound is a proxied round priced: its usage and costs (Task
// TaskProxy; Usage.Day is when the round was answered, to the instant),
// and the straight run's request (StraightInput tokens), which the
// thread's next round reads.
type PricedRound struct {
	Usage         LLMUsage
	StraightInput int64
}

// AddProxyRound adds an agent's proxied round to its tenant's day and,
// when session names a session the tenant holds (the thread the round was
// recorded to), to that session's sums, in one transaction. price prices
// the round from the straight run's last request of the thread, read with
// the session locked: rounds of one thread are priced one after another.
func (s *Store) AddProxyRound(ctx context.Context, tenant, session string, price func(StraightPrefix) PricedRound) error {
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		var prev StraightPrefix
		held := false
		if session != "" {
			row, err := tx.q.SessionProxyCostState(ctx, dbsqlc.SessionProxyCostStateParams{TenantID: tenant, SessionID: session})
			switch {
			case errors.Is(notFound(err), ErrNotFound):
			case err != nil:
				return fmt.Errorf("store.AddProxyRound: %w", err)
			default:
				held, prev.Tokens = true, row.ProxyStraightInput
				if row.ProxyPricedAt.Valid {
					prev.At = row.ProxyPricedAt.Time
				}
			}
		}
		r := price(prev)
		if err := tx.addLLMUsage(ctx, r.Usage, 0); err != nil {
			return fmt.Errorf("store.AddProxyRound: %w", err)
		}
		if !held {
			return nil
		}
		err := tx.q.SessionProxyCostAdd(ctx, dbsqlc.SessionProxyCostAddParams{
			TenantID: tenant, SessionID: session, CostNanousd: r.Usage.CostNanoUSD, StraightNanousd: r.Usage.StraightNanoUSD,
			StraightInput: r.StraightInput, PricedAt: timestamptz(r.Usage.Day),
		})
		if err != nil {
			return fmt.Errorf("store.AddProxyRound: %w", err)
		}
		return nil
	})
}

// ProxyCost is a session's proxied rounds priced.
type ProxyCost struct {
	SessionID       string
	Rounds          int64
	CostNanoUSD     int64
	StraightNanoUSD int64
	// LastAt is when its last round was priced; zero when none was.
	LastAt time.Time
}

// ProxyCosts reads the proxied rounds priced of the sessions named that
// the tenant holds, by session id.
func (t *Tx) ProxyCosts(ctx context.Context, sessions []string) ([]ProxyCost, error) {
	rows, err := t.q.SessionProxyCosts(ctx, dbsqlc.SessionProxyCostsParams{TenantID: t.tenant, SessionIds: sessions})
	if err != nil {
		return nil, fmt.Errorf("store.ProxyCosts: %w", err)
	}
	out := make([]ProxyCost, 0, len(rows))
	for _, r := range rows {
		c := ProxyCost{SessionID: r.SessionID, Rounds: r.ProxyPricedRounds, CostNanoUSD: r.ProxyCostNanousd, StraightNanoUSD: r.ProxyStraightNanousd}
		if r.ProxyPricedAt.Valid {
			c.LastAt = r.ProxyPricedAt.Time
		}
		out = append(out, c)
	}
	return out, nil
}

// LLMSpentOnDay is every token tenant's own model calls used on day (UTC),
// the agent's proxied rounds left out, and what every call cost in
// nano-dollars, the agent's rounds included.
func (s *Store) LLMSpentOnDay(ctx context.Context, tenant string, day time.Time) (tokens, costNanoUSD int64, err error) {
	err = s.InTx(ctx, tenant, func(tx *Tx) error {
		row, err := tx.q.LLMUsageOnDay(ctx, dbsqlc.LLMUsageOnDayParams{TenantID: tenant, Day: pgtype.Date{Time: day.UTC(), Valid: true}})
		if err != nil {
			return fmt.Errorf("store.LLMSpentOnDay: %w", err)
		}
		tokens, costNanoUSD = row.Tokens, row.CostNanousd
		return nil
	})
	return tokens, costNanoUSD, err
}

// LLMUsageOf lists tenant's usage by day, task, provider and model.
func (s *Store) LLMUsageOf(ctx context.Context, tenant string) ([]LLMUsage, error) {
	var out []LLMUsage
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		rows, err := tx.q.LLMUsageList(ctx, tenant)
		if err != nil {
			return fmt.Errorf("store.LLMUsageOf: %w", err)
		}
		out = usageRows(rows)
		return nil
	})
	return out, err
}

// LLMUsageBetween lists tenant's usage of the UTC days from to to (both
// included) by day, task, provider and model.
func (s *Store) LLMUsageBetween(ctx context.Context, tenant string, from, to time.Time) ([]LLMUsage, error) {
	var out []LLMUsage
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		rows, err := tx.q.LLMUsageBetween(ctx, dbsqlc.LLMUsageBetweenParams{
			TenantID: tenant, FromDay: pgtype.Date{Time: from.UTC(), Valid: true}, ToDay: pgtype.Date{Time: to.UTC(), Valid: true},
		})
		if err != nil {
			return fmt.Errorf("store.LLMUsageBetween: %w", err)
		}
		out = usageRows(rows)
		return nil
	})
	return out, err
}

func usageRows(rows []dbsqlc.LlmUsage) []LLMUsage {
	out := make([]LLMUsage, 0, len(rows))
	for _, r := range rows {
		out = append(out, LLMUsage{
			Day: r.Day.Time, Task: r.Task, Provider: r.Provider, Model: r.Model, Calls: r.Calls,
			FailedCalls: r.FailedCalls, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
			CacheReadTokens: r.CacheReadTokens, CacheWriteTokens: r.CacheWriteTokens, CostNanoUSD: r.CostNanousd,
			StraightNanoUSD: r.StraightNanousd,
		})
	}
	return out
}
