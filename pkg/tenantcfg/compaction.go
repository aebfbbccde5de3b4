package tenantcfg

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
)

// Compaction holds a tenant's compaction settings (see docs/compaction.md).
type Compaction struct {
	// Auto turns automatic compaction on for the tenant's sessions; each
	// session has its own switch too (PATCH /v1/sessions/{id}), and both
	// must be on. Manual compactions run either way.
	Auto bool `json:"auto"`
	// Instructions are appended to every LLM summary request of the tenant,
	// unless a manual request brings its own.
	Instructions string `json:"instructions"`
	// BreakerFailures is how many LLM compactions of a session may fail in a
	// row before its automatic compactions use the extractive summary only.
	BreakerFailures int `json:"breaker_failures"`
	// BreakerCooldownMinutes is how long an open circuit stays open: the
	// first automatic compaction after it asks the model once more
	// (half-open), and the answer closes the circuit or a failure opens it
	// for another cool-down.
	BreakerCooldownMinutes int `json:"breaker_cooldown_minutes"`
	// MinSavingPercent is the least share of the session's count a model
	// summary must save to be used; one that saves less, or leaves the
	// session at or above auto-compact, is not a success and the funnel
	// goes on to the extractive summary.
	MinSavingPercent int `json:"min_saving_percent"`
	// MinRetention is the least retention score (pkg/retention: the share of
	// what must survive the replaced messages that the result keeps) a
	// session-notes or model summary must reach to be used; one below it is
	// not a success and the funnel goes on to its next step. 0 turns it off.
	MinRetention float64 `json:"min_retention"`
	// ThrashCompactions automatic compactions within ThrashTurns turns of a
	// session hold the next one back until the oldest falls out of the
	// window (the thrash guard; 0 turns it off).
	ThrashCompactions int `json:"thrash_compactions"`
	ThrashTurns       int `json:"thrash_turns"`
	// Pinned are texts carried verbatim after every compaction of the
	// tenant's sessions, outside the summary, before each session's own
	// pins (PUT /v1/sessions/{id}/pins).
	Pinned []string `json:"pinned,omitempty"`
	// SessionMemory bounds what session-memory compaction keeps verbatim.
	SessionMemory KeepSettings `json:"session_memory"`
	// Restore bounds what is restored after a compaction.
	Restore RestoreSettings `json:"restore"`
	// Tools maps the tenant's tool names to the roles compaction knows.
	Tools ToolNames `json:"tools"`
}

// KeepSettings bound session-memory compaction: it keeps at least MinTokens and
// MinTextMessages messages with text, and never more than MaxTokens. Before
// it reads the notes it waits up to WaitSeconds for the session's notes to
// take in the turns accounted so far (0: it does not wait).
type KeepSettings struct {
	MinTokens       int64 `json:"min_tokens"`
	MinTextMessages int   `json:"min_text_messages"`
	MaxTokens       int64 `json:"max_tokens"`
	WaitSeconds     int   `json:"wait_seconds"`
}

// RestoreSettings bound what is restored: the Files most recently read files, each at most
// FileTokens, at most TotalTokens in all.
type RestoreSettings struct {
	Files       int   `json:"files"`
	FileTokens  int64 `json:"file_tokens"`
	TotalTokens int64 `json:"total_tokens"`
}

// ToolNames lists the tenant's tools by role. A list left out keeps the default.
type ToolNames struct {
	Read  []string `json:"read,omitempty"`
	Edit  []string `json:"edit,omitempty"`
	Write []string `json:"write,omitempty"`
	Shell []string `json:"shell,omitempty"`
	Todo  []string `json:"todo,omitempty"`
}

// DefaultCompaction holds the design's numbers.
func DefaultCompaction() Compaction {
	n := compaction.DefaultToolNames()
	return Compaction{
		Auto:                   true,
		BreakerFailures:        3,
		BreakerCooldownMinutes: 30,
		MinSavingPercent:       10,
		ThrashCompactions:      3,
		ThrashTurns:            10,
		SessionMemory:          KeepSettings{MinTokens: 10_000, MinTextMessages: 5, MaxTokens: 40_000, WaitSeconds: 15},
		Restore:                RestoreSettings{Files: 5, FileTokens: 5_000, TotalTokens: 50_000},
		Tools:                  ToolNames{Read: n.Read, Edit: n.Edit, Write: n.Write, Shell: n.Shell, Todo: n.Todo},
	}
}

// Validate reports settings that cannot work.
func (c Compaction) Validate() error {
	var errs []error
	if c.BreakerFailures < 1 {
		errs = append(errs, fmt.Errorf("compaction: breaker_failures must be at least 1, got %d", c.BreakerFailures))
	}
	if c.BreakerCooldownMinutes < 1 || c.BreakerCooldownMinutes > 7*24*60 {
		errs = append(errs, fmt.Errorf("compaction: breaker_cooldown_minutes must be within 1 and 10080 (a week), got %d", c.BreakerCooldownMinutes))
	}
	if c.MinSavingPercent < 0 || c.MinSavingPercent > 90 {
		errs = append(errs, fmt.Errorf("compaction: min_saving_percent must be within 0 and 90, got %d", c.MinSavingPercent))
	}
	if !(c.MinRetention >= 0 && c.MinRetention <= 1) {
		errs = append(errs, fmt.Errorf("compaction: min_retention must be within 0 and 1, got %v", c.MinRetention))
	}
	if c.ThrashCompactions < 0 || c.ThrashTurns < 1 || c.ThrashTurns > 10_000 || c.ThrashCompactions > c.ThrashTurns {
		errs = append(errs, fmt.Errorf("compaction: thrash_compactions must be within 0 and thrash_turns, and thrash_turns within 1 and 10000, got %d and %d", c.ThrashCompactions, c.ThrashTurns))
	}
	if err := CheckPins(c.Pinned); err != nil {
		errs = append(errs, fmt.Errorf("compaction: pinned: %w", err))
	}
	k := c.SessionMemory
	if k.MinTokens < 0 || k.MinTextMessages < 0 || k.MaxTokens <= 0 || k.MinTokens > k.MaxTokens {
		errs = append(errs, fmt.Errorf("compaction: session_memory needs 0 <= min_tokens <= max_tokens, max_tokens > 0 and min_text_messages >= 0, got %+v", k))
	}
	if k.WaitSeconds < 0 || k.WaitSeconds > 120 {
		errs = append(errs, fmt.Errorf("compaction: session_memory.wait_seconds must be within 0 and 120, got %d", k.WaitSeconds))
	}
	r := c.Restore
	if r.Files < 0 || r.FileTokens < 0 || r.TotalTokens < 0 {
		errs = append(errs, fmt.Errorf("compaction: restore limits must not be negative, got %+v", r))
	}
	if len(c.Instructions) > 20_000 {
		errs = append(errs, errors.New("compaction: instructions are longer than 20,000 bytes"))
	}
	return errors.Join(errs...)
}

// BreakerCooldown is BreakerCooldownMinutes as a duration.
func (c Compaction) BreakerCooldown() time.Duration {
	return time.Duration(c.BreakerCooldownMinutes) * time.Minute
}

// ToolNames returns the tool mapping in compaction's terms.
func (c Compaction) ToolNames() compaction.ToolNames {
	return compaction.ToolNames{Read: c.Tools.Read, Edit: c.Tools.Edit, Write: c.Tools.Write, Shell: c.Tools.Shell, Todo: c.Tools.Todo}
}

// LLM holds a tenant's model-call settings.
type LLM struct {
	// DailyTokenBudget bounds the tokens the tenant's model calls may use per
	// UTC day, every task together; 0 means no bound.
	DailyTokenBudget int64 `json:"daily_token_budget"`
	// DailyBudgetUSD bounds what the tenant's model calls may cost per UTC
	// day, every task together, by the tenant's prices; 0 means no bound.
	// Its JSON is a number of dollars ("daily_budget_usd": 2.5).
	DailyBudgetUSD llm.USD `json:"daily_budget_usd"`
	// Prices are the tenant's own prices of models, in dollars per million
	// tokens, over the process's table (MNEMOS_LLM_PRICES over the list
	// prices): a model's key here wins over the table's. Each price names
	// input, output, cache_write and cache_read.
	Prices llm.Prices `json:"prices,omitempty"`
}

// Validate reports settings that cannot work.
func (l LLM) Validate() error {
	if l.DailyTokenBudget < 0 {
		return fmt.Errorf("llm: daily_token_budget must not be negative, got %d", l.DailyTokenBudget)
	}
	if l.DailyBudgetUSD < 0 {
		return fmt.Errorf("llm: daily_budget_usd must not be negative, got %s", l.DailyBudgetUSD)
	}
	if err := l.Prices.Validate(); err != nil {
		return fmt.Errorf("llm: prices: %w", err)
	}
	return nil
}

// Bounds of pinned texts, a tenant's and a session's each.
const (
	MaxPins     = 20
	MaxPinBytes = 4_000
)

// CheckPins reports pinned texts out of bounds: more than MaxPins, an empty
// one, or one longer than MaxPinBytes.
func CheckPins(pins []string) error {
	if len(pins) > MaxPins {
		return fmt.Errorf("%d texts, at most %d", len(pins), MaxPins)
	}
	for i, p := range pins {
		switch {
		case strings.TrimSpace(p) == "":
			return fmt.Errorf("text %d is empty", i)
		case len(p) > MaxPinBytes:
			return fmt.Errorf("text %d is %d bytes, at most %d", i, len(p), MaxPinBytes)
		}
	}
	return nil
}

// Compacts reports whether a session compacts by itself: its own switch
// (PATCH /v1/sessions/{id}) and the tenant's (Auto) both on.
func (c Compaction) Compacts(s sessionstate.Session) bool { return c.Auto && s.AutoCompactEnabled }

// AutoDecision is whether a turn asks for an automatic compaction.
type AutoDecision struct {
	// Ask: the turn asks; Seqs are then the session's AutoCompactSeqs with
	// it. Held: the thrash guard held a due compaction back.
	Ask, Held bool
	Seqs      []int64
}

// AutoCompaction decides for turn seq of session s, whose count is above
// its auto-compact threshold (above), whether the turn asks for an
// automatic compaction: the session compacts by itself, none is in flight,
// and the thrash guard lets it — a session that asked ThrashCompactions
// times within its last ThrashTurns turns asks for no more until the oldest
// falls out of that window (0 compactions turns the guard off). The
// accountant decides with it after each turn, the gateway before a call.
func (c Compaction) AutoCompaction(s sessionstate.Session, seq int64, above bool) AutoDecision {
	if !above || !c.Compacts(s) || s.CompactionInFlight {
		return AutoDecision{}
	}
	within := 0
	for _, asked := range s.AutoCompactSeqs {
		if seq-asked < int64(c.ThrashTurns) {
			within++
		}
	}
	if c.ThrashCompactions > 0 && within >= c.ThrashCompactions {
		return AutoDecision{Held: true}
	}
	seqs := append(slices.Clone(s.AutoCompactSeqs), seq)
	return AutoDecision{Ask: true, Seqs: seqs[max(len(seqs)-max(c.ThrashCompactions, 1), 0):]}
}
