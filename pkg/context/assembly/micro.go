package assembly

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// ToolSet is a set of tool names. In JSON it is an array of names, written sorted.
type ToolSet map[string]struct{}

// NewToolSet returns the set of names.
func NewToolSet(names ...string) ToolSet {
	s := make(ToolSet, len(names))
	for _, n := range names {
		s[n] = struct{}{}
	}
	return s
}

// DefaultToolSet names the tools whose results micro-compaction may clear:
// Claude Code's file read, shell, grep, glob, web search, web fetch, and
// file edit and write tools, and the Codex CLI's shell (exec_command, its
// input to a running command write_stdin, the older shell) and patch tools.
func DefaultToolSet() ToolSet {
	return NewToolSet("Read", "Bash", "Grep", "Glob", "WebSearch", "WebFetch",
		"Edit", "MultiEdit", "Write", "NotebookEdit",
		"exec_command", "write_stdin", "shell", "apply_patch")
}

// Has reports whether name is in the set.
func (s ToolSet) Has(name string) bool {
	_, ok := s[name]
	return ok
}

// Names returns the names, sorted.
func (s ToolSet) Names() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// MarshalJSON writes the sorted array of names.
func (s ToolSet) MarshalJSON() ([]byte, error) {
	return turn.Marshal(s.Names())
}

// UnmarshalJSON reads an array of names. The array replaces the set (it is
// never merged into a set decoded earlier); null leaves the set as it is.
func (s *ToolSet) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var names []string
	if err := json.Unmarshal(data, &names); err != nil {
		return fmt.Errorf("tool set: want an array of tool names: %w", err)
	}
	*s = NewToolSet(names...)
	return nil
}

// Result is a tool result micro-compaction may clear.
type Result struct {
	ToolUseID string
	// Message and Block locate the tool_result block in the messages given to Compactable.
	Message int
	Block   int
	// Tokens estimates the tool_result block as it is.
	Tokens int64
	// ClearedTokens estimates it once cleared.
	ClearedTokens int64
}

// Saving is the tokens clearing the result saves; zero or less when it would not shrink it.
func (r Result) Saving() int64 { return r.Tokens - r.ClearedTokens }

// Compactable lists, in conversation order, the tool results of msgs that
// micro-compaction may clear: tool_result blocks of user messages answering
// a tool_use of an earlier assistant message of msgs whose name is in tools,
// and not in cleared. A tool_use id answered twice is listed once, at its
// first result (clearing applies to both).
func Compactable(msgs []view.Message, tools ToolSet, cleared map[string]bool) []Result {
	names := make(map[string]string) // tool_use id → tool name
	listed := make(map[string]bool)
	var out []Result
	for mi := range msgs {
		m := &msgs[mi] // not copied: every context read walks every block
		for bi := range m.Content {
			b := &m.Content[bi]
			switch {
			case m.Role == "assistant" && b.Type == turn.BlockToolUse:
				if _, ok := names[b.ID]; !ok {
					names[b.ID] = b.Name
				}
			case m.Role == "user" && b.Type == turn.BlockToolResult:
				name, ok := names[b.ToolUseID]
				if !ok || !tools.Has(name) || cleared[b.ToolUseID] || listed[b.ToolUseID] {
					continue
				}
				listed[b.ToolUseID] = true
				out = append(out, Result{
					ToolUseID:     b.ToolUseID,
					Message:       mi,
					Block:         bi,
					Tokens:        tokens.EstimateBlock(*b),
					ClearedTokens: tokens.EstimateBlock(clearedBlock(*b)),
				})
			}
		}
	}
	return out
}

// BySize is micro-compaction by size: when count is above warning, clear
// every result but the keep most recent, if that saves at least minSaving
// tokens. Results that clearing would not shrink are left alone and count
// for nothing. It returns the tool_use ids to clear, in conversation order,
// or nil.
func BySize(results []Result, count, warning int64, keep int, minSaving int64) []string {
	if count <= warning {
		return nil
	}
	ids, saving := older(results, keep)
	if len(ids) == 0 || saving < minSaving {
		return nil
	}
	return ids
}

// ByTime is micro-compaction by time: when more than idle passed from
// lastResponse to now (the provider's prompt cache has expired, so clearing
// breaks nothing), clear every result but the keep most recent, and never
// the most recent one (a keep below 1 counts as 1). Results that
// clearing would not shrink are left alone. A zero lastResponse (no
// response yet) clears nothing. It returns the tool_use ids to clear, in
// conversation order, or nil.
func ByTime(results []Result, lastResponse, now time.Time, idle time.Duration, keep int) []string {
	if lastResponse.IsZero() || now.Sub(lastResponse) <= idle {
		return nil
	}
	ids, _ := older(results, max(keep, minIdleKeep))
	return ids
}

// minIdleKeep is the fewest results clearing by time keeps, whatever the
// settings say: the latest result is what the agent is most likely still
// working from.
const minIdleKeep = 1

// older returns the ids of the results before the keep most recent that
// clearing would shrink, in conversation order, and what clearing them saves.
func older(results []Result, keep int) ([]string, int64) {
	sorted := slices.Clone(results)
	slices.SortStableFunc(sorted, func(a, b Result) int {
		if a.Message != b.Message {
			return a.Message - b.Message
		}
		return a.Block - b.Block
	})
	keep = max(keep, 0)
	if len(sorted) <= keep {
		return nil, 0
	}
	var (
		ids    []string
		saving int64
	)
	for _, r := range sorted[:len(sorted)-keep] {
		if r.Saving() > 0 {
			ids = append(ids, r.ToolUseID)
			saving += r.Saving()
		}
	}
	return ids, saving
}

// MicroConfig holds the numbers of micro-compaction (see docs/compaction.md), part of a
// tenant's settings. Start from DefaultMicroConfig: a field left at zero
// means zero, not the default.
type MicroConfig struct {
	// Tools names the tools whose results may be cleared; an empty set turns
	// micro-compaction off. A tenant's list replaces the default one.
	Tools ToolSet `json:"tools"`
	// SizeKeep is how many of the most recent results clearing by size keeps.
	SizeKeep int `json:"size_keep"`
	// SizeMinSaving is the fewest tokens clearing by size must save to happen.
	SizeMinSaving int64 `json:"size_min_saving"`
	// IdleMinutes is how long after the last response clearing by time
	// starts at the latest; it starts sooner when the cache expires sooner.
	IdleMinutes int `json:"idle_minutes"`
	// IdleKeep is how many of the most recent results clearing by time keeps.
	IdleKeep int `json:"idle_keep"`
	// CostKeep is how many of the most recent results clearing by cost
	// keeps; 0 turns clearing by cost off.
	CostKeep int `json:"cost_keep"`
	// CacheTTLMinutes is how long the provider keeps a prompt-cache entry
	// that is not read: 5 (the API's default) or 60 (an hour's entries,
	// written at twice the input price). It sets what a cache write costs
	// in clearing by cost, and when clearing by time finds the cache gone.
	CacheTTLMinutes int `json:"cache_ttl_minutes"`
}

// DefaultMicroConfig returns the defaults of docs/compaction.md.
func DefaultMicroConfig() MicroConfig {
	return MicroConfig{
		Tools:           DefaultToolSet(),
		SizeKeep:        3,
		SizeMinSaving:   20_000,
		IdleMinutes:     60,
		IdleKeep:        5,
		CostKeep:        2,
		CacheTTLMinutes: 5,
	}
}

// Idle is how long after the last response clearing by time starts: the
// cache's time to live, or IdleMinutes when that is sooner.
func (c MicroConfig) Idle() time.Duration {
	return time.Duration(min(c.IdleMinutes, c.CacheTTLMinutes)) * time.Minute
}

// Prices are the prompt cache's prices relative to plain input: a read, and
// a write of an entry of the tenant's time to live.
func (c MicroConfig) Prices() CachePrices {
	if c.CacheTTLMinutes >= 60 {
		return CachePrices{Read: 0.1, Write: 2}
	}
	return CachePrices{Read: 0.1, Write: 1.25}
}

// Validate reports settings that cannot work.
func (c MicroConfig) Validate() error {
	var errs []error
	if c.SizeKeep < 0 {
		errs = append(errs, fmt.Errorf("micro: size_keep must be zero or more, got %d", c.SizeKeep))
	}
	if c.SizeMinSaving < 0 {
		errs = append(errs, fmt.Errorf("micro: size_min_saving must be zero or more, got %d", c.SizeMinSaving))
	}
	if c.IdleMinutes <= 0 {
		errs = append(errs, fmt.Errorf("micro: idle_minutes must be above zero, got %d", c.IdleMinutes))
	}
	if c.IdleKeep < 0 {
		errs = append(errs, fmt.Errorf("micro: idle_keep must be zero or more, got %d", c.IdleKeep))
	}
	if c.CostKeep < 0 {
		errs = append(errs, fmt.Errorf("micro: cost_keep must be zero or more, got %d", c.CostKeep))
	}
	if c.CacheTTLMinutes != 5 && c.CacheTTLMinutes != 60 {
		errs = append(errs, fmt.Errorf("micro: cache_ttl_minutes must be 5 or 60 (the provider's two times to live), got %d", c.CacheTTLMinutes))
	}
	for _, n := range c.Tools.Names() {
		if strings.TrimSpace(n) == "" {
			errs = append(errs, errors.New("micro: tools holds an empty name"))
			break
		}
	}
	return errors.Join(errs...)
}

// MicroInput is what micro-compaction decides from.
type MicroInput struct {
	// Messages are the session's messages after the latest compaction's
	// kept point; Cleared the tool_use ids already cleared.
	Messages []view.Message
	Cleared  map[string]bool
	// Pending are the client's messages the session has not stored yet —
	// its rounds the accountant has not applied, then the current one —
	// when the decision is a proxied request's (nil otherwise: the next
	// call brings nothing more). They are never cleared, but they count
	// among the most recent results a rule keeps, so that a decision does
	// not depend on how far the accountant has got.
	Pending []turn.Message
	// Count and Warning are the session's token count (or the count ahead)
	// and its warning threshold; LastResponse the time of its last response.
	Count, Warning    int64
	LastResponse, Now time.Time
}

// Decide runs the three rules over in: by time, by size and by cost. It
// returns the tool_use ids to clear now, in conversation order, or nil;
// the caller records them next to the ones already in in.Cleared. One
// rule's clearing can make another's due (clearing by time shrinks what
// clearing by cost would rewrite): the rules run again over what they
// cleared until none adds anything, so that deciding again on the same
// state decides nothing.
func (c MicroConfig) Decide(in MicroInput) []string {
	cleared := in.Cleared
	var chosen map[string]bool
	for {
		ids := c.decideOnce(in, cleared)
		if len(ids) == 0 {
			break
		}
		if chosen == nil {
			chosen = map[string]bool{}
			cleared = maps.Clone(in.Cleared)
			if cleared == nil {
				cleared = map[string]bool{}
			}
		}
		for _, id := range ids {
			chosen[id], cleared[id] = true, true
		}
	}
	if len(chosen) == 0 {
		return nil
	}
	var out []string
	for _, r := range Compactable(in.Messages, c.Tools, in.Cleared) {
		if chosen[r.ToolUseID] {
			out = append(out, r.ToolUseID)
		}
	}
	return out
}

// decideOnce runs each rule once over in, with cleared in place of
// in.Cleared, and returns what they clear, in any order.
func (c MicroConfig) decideOnce(in MicroInput, cleared map[string]bool) []string {
	results := Compactable(in.Messages, c.Tools, cleared)
	pending := pendingOf(in.Messages, in.Pending, c.Tools)
	byTime := ByTime(results, in.LastResponse, in.Now, c.Idle(), max(c.IdleKeep-len(pending.Results), 0))
	bySize := BySize(results, in.Count, in.Warning, max(c.SizeKeep-len(pending.Results), 0), c.SizeMinSaving)
	byCost := ByCost(in.Messages, results, pending, c.CostKeep, c.Prices())
	return slices.Concat(byTime, bySize, byCost)
}
