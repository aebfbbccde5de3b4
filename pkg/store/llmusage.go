package store

import (
	"context"
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
}

// Add returns the sum of u and o (their day, task, provider and model are u's).
func (u LLMUsage) Add(o LLMUsage) LLMUsage {
	u.Calls += o.Calls
	u.FailedCalls += o.FailedCalls
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.CostNanoUSD += o.CostNanoUSD
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
		err := tx.q.LLMUsageAdd(ctx, dbsqlc.LLMUsageAddParams{
			TenantID: tenant, Day: pgtype.Date{Time: u.Day.UTC(), Valid: true}, Task: u.Task, Provider: u.Provider,
			Model: u.Model, Failed: f, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, CostNanousd: u.CostNanoUSD,
		})
		if err != nil {
			return fmt.Errorf("store.AddLLMUsage: %w", err)
		}
		return nil
	})
}

// LLMSpentOnDay is every token tenant's model calls used on day (UTC), and
// what they cost in nano-dollars.
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
		})
	}
	return out
}
