// Package llmledger keeps model-call usage in Postgres, per tenant, UTC day,
// task, provider and model, with what the calls cost by the tenant's
// prices, and enforces each tenant's daily budgets of tokens and of money.
// It is the llm.Recorder, llm.Budget and llm.Pricer of a running process,
// and finds the agent requests background calls fork (AgentRequests).
package llmledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// Ledger records usage, prices calls and answers budget questions.
type Ledger struct {
	store    *store.Store
	settings *tenantcfg.Cache
	prices   llm.Prices
	now      func() time.Time
}

// Option changes a Ledger.
type Option func(*Ledger)

// WithPrices makes p the process's price table, beneath every tenant's own
// prices (llm.DefaultPrices without it).
func WithPrices(p llm.Prices) Option { return func(l *Ledger) { l.prices = p } }

// New returns a ledger over st; settings gives each tenant's budgets and
// prices.
func New(st *store.Store, settings *tenantcfg.Cache, opts ...Option) *Ledger {
	l := &Ledger{store: st, settings: settings, prices: llm.DefaultPrices(), now: time.Now}
	for _, o := range opts {
		o(l)
	}
	return l
}

var (
	_ llm.Recorder = (*Ledger)(nil)
	_ llm.Budget   = (*Ledger)(nil)
	_ llm.Pricer   = (*Ledger)(nil)
)

// Price is the price of model for tenant: the tenant's own price when its
// settings name one for the model, else the process's table's. The second
// result is false when neither knows the model.
func (l *Ledger) Price(ctx context.Context, tenant, model string) (llm.Price, bool, error) {
	set, err := l.settings.For(ctx, tenant)
	if err != nil {
		return llm.Price{}, false, fmt.Errorf("llmledger.Price: %w", err)
	}
	if p, ok := set.LLM.Prices.Lookup(model); ok {
		return p, true, nil
	}
	p, ok := l.prices.Lookup(model)
	return p, ok, nil
}

// Cost is what c cost its tenant: nothing for the builtin provider, which
// calls no model, nor for a model no price table knows; else its tokens of
// each kind at the model's price.
func (l *Ledger) Cost(ctx context.Context, c llm.Call) (llm.USD, error) {
	if c.Provider == builtin.Name || c.Usage == (llm.Usage{}) {
		return 0, nil
	}
	p, ok, err := l.Price(ctx, c.Tenant, c.Model)
	if err != nil || !ok {
		return 0, err
	}
	return p.Cost(c.Usage), nil
}

// Record adds one call's usage and cost to its tenant's day.
func (l *Ledger) Record(ctx context.Context, c llm.Call) error {
	at := c.At
	if at.IsZero() {
		at = l.now()
	}
	err := l.store.AddLLMUsage(ctx, c.Tenant, store.LLMUsage{
		Day: at.UTC(), Task: string(c.Task), Provider: c.Provider, Model: c.Model,
		InputTokens: c.Usage.InputTokens, OutputTokens: c.Usage.OutputTokens,
		CacheReadTokens: c.Usage.CacheReadTokens, CacheWriteTokens: c.Usage.CacheWriteTokens,
		CostNanoUSD: int64(c.Cost),
	}, c.Err != nil)
	if err != nil {
		return fmt.Errorf("llmledger.Record: %w", err)
	}
	return nil
}

// Allow refuses a tenant whose calls today used its daily token budget
// (llm.daily_token_budget) or cost its daily budget of money
// (llm.daily_budget_usd), saying which and how much was spent. As with
// tokens, the call that crosses the budget is allowed: what a call costs
// is known only after it.
func (l *Ledger) Allow(ctx context.Context, tenant string) error {
	set, err := l.settings.For(ctx, tenant)
	if err != nil {
		return fmt.Errorf("llmledger.Allow: %w", err)
	}
	if set.LLM.DailyTokenBudget <= 0 && set.LLM.DailyBudgetUSD <= 0 {
		return nil
	}
	used, cost, err := l.store.LLMSpentOnDay(ctx, tenant, l.now())
	if err != nil {
		return fmt.Errorf("llmledger.Allow: %w", err)
	}
	return Check(tenant, set.LLM, used, llm.USD(cost))
}

// Check is the budgets' verdict on a tenant that has used tokens costing
// cost today: nil, or an error wrapping llm.ErrBudgetExhausted that names
// the budget spent and by how much.
func Check(tenant string, set tenantcfg.LLM, tokens int64, cost llm.USD) error {
	if limit := set.DailyTokenBudget; limit > 0 && tokens >= limit {
		return fmt.Errorf("tenant %s used %d of its %d tokens today (llm.daily_token_budget): %w", tenant, tokens, limit, llm.ErrBudgetExhausted)
	}
	if limit := set.DailyBudgetUSD; limit > 0 && cost >= limit {
		return fmt.Errorf("tenant %s spent $%s of its $%s today (llm.daily_budget_usd): %w", tenant, cost, limit, llm.ErrBudgetExhausted)
	}
	return nil
}

// AgentRequests finds a session's last agent request in st, the one the
// Messages API proxy kept (store.AgentRequest), for llm.WithForks.
func AgentRequests(st *store.Store) llm.Prefixes {
	return func(ctx context.Context, tenant, session string) (*llm.Prefix, error) {
		var ar store.AgentRequest
		err := st.InTx(ctx, tenant, func(tx *store.Tx) error {
			var err error
			ar, err = tx.AgentRequest(ctx, session)
			return err
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &llm.Prefix{Model: ar.Model, Body: ar.Body, Reply: ar.Reply, Beta: ar.Beta}, nil
	}
}
