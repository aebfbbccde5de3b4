package llm

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// MemoryLedger is an in-memory Budget and Recorder, for tests and
// development: each tenant may spend up to a limit of tokens (every kind
// counted, Usage.Total), and every recorded call is kept. It is safe for
// concurrent use.
type MemoryLedger struct {
	limit int64

	mu    sync.Mutex
	spent map[string]int64
	calls []Call
}

// NewMemoryLedger returns a ledger allowing each tenant limitPerTenant
// tokens; 0 or less means no limit.
func NewMemoryLedger(limitPerTenant int64) *MemoryLedger {
	return &MemoryLedger{limit: limitPerTenant, spent: map[string]int64{}}
}

// Allow refuses a tenant that has spent its limit, with an error wrapping
// ErrBudgetExhausted. The call that crosses the limit is allowed: the
// budget is checked before a call, whose cost is known only after.
func (l *MemoryLedger) Allow(_ context.Context, tenant string) error {
	if l.limit <= 0 {
		return nil
	}
	l.mu.Lock()
	spent := l.spent[tenant]
	l.mu.Unlock()
	if spent >= l.limit {
		return fmt.Errorf("%w: %d of %d tokens spent", ErrBudgetExhausted, spent, l.limit)
	}
	return nil
}

// Record adds the call's tokens to its tenant's spending and keeps the call.
func (l *MemoryLedger) Record(_ context.Context, c Call) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spent[c.Tenant] += c.Usage.Total()
	l.calls = append(l.calls, c)
	return nil
}

// Spent is how many tokens tenant has spent.
func (l *MemoryLedger) Spent(tenant string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spent[tenant]
}

// Calls returns the recorded calls, oldest first.
func (l *MemoryLedger) Calls() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}
