// Package llmledger keeps model-call usage in Postgres, per tenant, UTC day,
// task, provider and model, and enforces each tenant's daily token budget.
// It is the llm.Recorder and llm.Budget of a running process.
package llmledger

import (
	"context"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// Ledger records usage and answers budget questions.
type Ledger struct {
	store    *store.Store
	settings *tenantcfg.Cache
	now      func() time.Time
}

// New returns a ledger over st; settings gives each tenant's budget.
func New(st *store.Store, settings *tenantcfg.Cache) *Ledger {
	return &Ledger{store: st, settings: settings, now: time.Now}
}

var (
	_ llm.Recorder = (*Ledger)(nil)
	_ llm.Budget   = (*Ledger)(nil)
)

// Record adds one call's usage to its tenant's day.
func (l *Ledger) Record(ctx context.Context, c llm.Call) error {
	at := c.At
	if at.IsZero() {
		at = l.now()
	}
	err := l.store.AddLLMUsage(ctx, c.Tenant, store.LLMUsage{
		Day: at.UTC(), Task: string(c.Task), Provider: c.Provider, Model: c.Model,
		InputTokens: c.Usage.InputTokens, OutputTokens: c.Usage.OutputTokens,
		CacheReadTokens: c.Usage.CacheReadTokens, CacheWriteTokens: c.Usage.CacheWriteTokens,
	}, c.Err != nil)
	if err != nil {
		return fmt.Errorf("llmledger.Record: %w", err)
	}
	return nil
}

// Allow refuses a tenant whose calls today used its daily budget.
func (l *Ledger) Allow(ctx context.Context, tenant string) error {
	set, err := l.settings.For(ctx, tenant)
	if err != nil {
		return fmt.Errorf("llmledger.Allow: %w", err)
	}
	limit := set.LLM.DailyTokenBudget
	if limit <= 0 {
		return nil
	}
	used, err := l.store.LLMTokensOnDay(ctx, tenant, l.now())
	if err != nil {
		return fmt.Errorf("llmledger.Allow: %w", err)
	}
	if used >= limit {
		return fmt.Errorf("tenant %s used %d of its %d tokens today: %w", tenant, used, limit, llm.ErrBudgetExhausted)
	}
	return nil
}
