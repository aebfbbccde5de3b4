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
}

// AddLLMUsage adds one call's usage to its tenant's day.
func (s *Store) AddLLMUsage(ctx context.Context, tenant string, u LLMUsage, failed bool) error {
	var f int64
	if failed {
		f = 1
	}
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		err := tx.q.LLMUsageAdd(ctx, dbsqlc.LLMUsageAddParams{
			TenantID: tenant, Day: pgtype.Date{Time: u.Day.UTC(), Valid: true}, Task: u.Task, Provider: u.Provider,
			Model: u.Model, Failed: f, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens,
		})
		if err != nil {
			return fmt.Errorf("store.AddLLMUsage: %w", err)
		}
		return nil
	})
}

// LLMTokensOnDay is every token tenant's model calls used on day (UTC).
func (s *Store) LLMTokensOnDay(ctx context.Context, tenant string, day time.Time) (int64, error) {
	var n int64
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		var err error
		n, err = tx.q.LLMUsageTokensOnDay(ctx, dbsqlc.LLMUsageTokensOnDayParams{TenantID: tenant, Day: pgtype.Date{Time: day.UTC(), Valid: true}})
		if err != nil {
			return fmt.Errorf("store.LLMTokensOnDay: %w", err)
		}
		return nil
	})
	return n, err
}

// LLMUsageOf lists tenant's usage by day, task, provider and model.
func (s *Store) LLMUsageOf(ctx context.Context, tenant string) ([]LLMUsage, error) {
	var out []LLMUsage
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		rows, err := tx.q.LLMUsageList(ctx, tenant)
		if err != nil {
			return fmt.Errorf("store.LLMUsageOf: %w", err)
		}
		for _, r := range rows {
			out = append(out, LLMUsage{
				Day: r.Day.Time, Task: r.Task, Provider: r.Provider, Model: r.Model, Calls: r.Calls,
				FailedCalls: r.FailedCalls, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
				CacheReadTokens: r.CacheReadTokens, CacheWriteTokens: r.CacheWriteTokens,
			})
		}
		return nil
	})
	return out, err
}
