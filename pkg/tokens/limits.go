package tokens

import (
	"errors"
	"fmt"
	"sort"
)

// Config holds every number of the threshold rule. Start from DefaultConfig:
// a field left at zero means zero, not the default.
type Config struct {
	// DefaultWindow is the context window of a model the table does not know.
	DefaultWindow int64 `json:"default_window"`
	// MaxReserve caps the tokens reserved for the response.
	MaxReserve int64 `json:"max_reserve"`
	// AutoCompactBuffer is how far below the effective window auto-compaction starts.
	AutoCompactBuffer int64 `json:"auto_compact_buffer"`
	// WarningBuffer is how far below auto-compact the warning state starts.
	WarningBuffer int64 `json:"warning_buffer"`
	// ErrorBuffer is how far below auto-compact the error state starts.
	ErrorBuffer int64 `json:"error_buffer"`
	// BlockingBuffer is how far below the effective window requests are refused.
	BlockingBuffer int64 `json:"blocking_buffer"`
	// AutoCompactPercent, when above 0, is a percentage of the effective
	// window; it may only lower the auto-compact threshold, never raise it.
	AutoCompactPercent float64 `json:"auto_compact_percent"`
	// Models overrides the model table for model families, by family name
	// (a table family such as "gpt-5" or "claude-sonnet-4-5", or a model
	// the table does not know). The longest family that matches a model
	// wins, as in the table; a field left at zero keeps the table's number.
	Models map[string]ModelOverride `json:"models,omitempty"`
}

// ModelOverride is a tenant's context window and default max output tokens
// for a model family, in place of the model table's.
type ModelOverride struct {
	Window    int64 `json:"window,omitempty"`
	MaxOutput int64 `json:"max_output,omitempty"`
}

// Model is LookupModel with c.Models over the table: the longest family of
// c.Models that matches the model replaces the table's window and max
// output with those it names. A model's [1m] tag still sets the 1M window.
// The second result is true when the table or an override knows the model.
func (c Config) Model(model string) (ModelInfo, bool) {
	info, ok := LookupModel(model)
	if len(c.Models) == 0 {
		return info, ok
	}
	name, oneMillion := ModelName(model)
	best, found := "", false
	for family := range c.Models {
		if familyMatches(name, family) && (!found || len(family) > len(best)) {
			best, found = family, true
		}
	}
	if !found {
		return info, ok
	}
	o := c.Models[best]
	if !ok {
		info.Family = best
	}
	if o.Window > 0 && !oneMillion {
		info.Window = o.Window
	}
	if o.MaxOutput > 0 {
		info.MaxOutput = o.MaxOutput
	}
	return info, true
}

// validateModels reports overrides that name no family, or numbers no
// threshold can be derived from.
func (c Config) validateModels() []error {
	var errs []error
	for family, o := range c.Models {
		field := fmt.Sprintf("models[%q]", family)
		if name, _ := ModelName(family); family == "" || name != family {
			errs = append(errs, fmt.Errorf("%s: a family is a lower-case model name without a provider prefix or [1m] tag", field))
			continue
		}
		if o.Window < 0 || o.Window > MaxWindow || o.MaxOutput < 0 || o.MaxOutput > MaxWindow {
			errs = append(errs, fmt.Errorf("%s: window and max_output must be within 0..%d", field, MaxWindow))
			continue
		}
		if o.Window == 0 && o.MaxOutput == 0 {
			errs = append(errs, fmt.Errorf("%s: name a window or a max_output", field))
			continue
		}
		if l := c.Limits(family, 0, 0); !l.roomy() {
			errs = append(errs, fmt.Errorf("%s: a window of %d with a reserve of %d leaves no room for the thresholds", field, l.Window, l.Reserve))
		}
	}
	return errs
}

// DefaultConfig returns the defaults of docs/token-accounting.md.
func DefaultConfig() Config {
	return Config{
		DefaultWindow:     ClaudeWindow,
		MaxReserve:        20_000,
		AutoCompactBuffer: 13_000,
		WarningBuffer:     20_000,
		ErrorBuffer:       20_000,
		BlockingBuffer:    3_000,
	}
}

// Validate reports a configuration no threshold can be derived from.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"default_window", c.DefaultWindow},
		{"max_reserve", c.MaxReserve},
		{"auto_compact_buffer", c.AutoCompactBuffer},
		{"warning_buffer", c.WarningBuffer},
		{"error_buffer", c.ErrorBuffer},
		{"blocking_buffer", c.BlockingBuffer},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be zero or more, got %d", f.name, f.v))
		}
	}
	if c.DefaultWindow == 0 {
		errs = append(errs, errors.New("default_window must be above zero"))
	}
	if c.AutoCompactPercent < 0 || c.AutoCompactPercent > 100 {
		errs = append(errs, fmt.Errorf("auto_compact_percent must be within 0..100, got %v", c.AutoCompactPercent))
	}
	if c.DefaultWindow > 0 && c.DefaultWindow <= c.MaxReserve+c.AutoCompactBuffer {
		errs = append(errs, fmt.Errorf("default_window %d leaves no room above max_reserve %d + auto_compact_buffer %d",
			c.DefaultWindow, c.MaxReserve, c.AutoCompactBuffer))
	}
	errs = append(errs, c.validateModels()...)
	return errors.Join(errs...)
}

// Limits are the thresholds of one session's context window, in tokens.
type Limits struct {
	Window      int64 `json:"window"`
	Reserve     int64 `json:"reserve"`
	Effective   int64 `json:"effective"`
	AutoCompact int64 `json:"auto_compact"`
	Warning     int64 `json:"warning"`
	Error       int64 `json:"error"`
	Blocking    int64 `json:"blocking"`
}

// Limits derives the thresholds for a model. contextWindow and
// maxOutputTokens are the event's values; zero (or less) means unset.
//
// window = contextWindow, else the model table (with c.Models over it, see
// Config.Model), else c.DefaultWindow;
// reserve = min(maxOutputTokens or the model's default, c.MaxReserve);
// effective = window − reserve; auto-compact = effective − c.AutoCompactBuffer
// (lowered to effective·pct/100 when that is lower); warning and error are
// below auto-compact by their buffers; blocking = effective − c.BlockingBuffer.
func (c Config) Limits(model string, contextWindow, maxOutputTokens int64) Limits {
	info, _ := c.Model(model)
	window := contextWindow
	if window <= 0 {
		window = info.Window
	}
	if window <= 0 {
		window = c.DefaultWindow
	}
	reserve := maxOutputTokens
	if reserve <= 0 {
		reserve = info.MaxOutput
	}
	reserve = min(reserve, c.MaxReserve)

	l := Limits{Window: window, Reserve: reserve, Effective: window - reserve}
	l.AutoCompact = l.Effective - c.AutoCompactBuffer
	if c.AutoCompactPercent > 0 {
		if pct := int64(float64(l.Effective) * c.AutoCompactPercent / 100); pct < l.AutoCompact {
			l.AutoCompact = pct
		}
	}
	l.Warning = l.AutoCompact - c.WarningBuffer
	l.Error = l.AutoCompact - c.ErrorBuffer
	l.Blocking = l.Effective - c.BlockingBuffer
	return l
}

// MaxWindow bounds the context window and the max output tokens a caller
// may name: twice the largest window the model table knows (gpt-4.1's
// 1,047,576), room for the next model without taking any number at all.
const MaxWindow int64 = 2_097_152

// WindowError says why a context window or max output tokens named by a
// caller cannot be used: Field is "context_window" or "max_output_tokens".
type WindowError struct {
	Field  string
	Detail string
}

func (e *WindowError) Error() string { return e.Field + ": " + e.Detail }

// CheckWindow refuses a context window or max output tokens (zero: not
// named) that is negative, above MaxWindow, or leaves no room for the
// thresholds: with a window smaller than the reserve plus the buffers, every
// threshold is zero or less, and every count is "blocking".
func (c Config) CheckWindow(model string, contextWindow, maxOutputTokens int64) *WindowError {
	for _, f := range []struct {
		name string
		v    int64
	}{{"context_window", contextWindow}, {"max_output_tokens", maxOutputTokens}} {
		if f.v < 0 || f.v > MaxWindow {
			return &WindowError{Field: f.name, Detail: fmt.Sprintf("%d is outside 1..%d (0 or absent: the model's)", f.v, MaxWindow)}
		}
	}
	if c.Limits(model, contextWindow, maxOutputTokens).roomy() {
		return nil
	}
	field := "context_window"
	if contextWindow == 0 {
		field = "max_output_tokens"
	}
	// The thresholds grow with the window: find the smallest that works.
	least := sort.Search(int(MaxWindow)+1, func(w int) bool {
		return w > 0 && c.Limits(model, int64(w), maxOutputTokens).roomy()
	})
	l := c.Limits(model, contextWindow, maxOutputTokens)
	detail := fmt.Sprintf("a window of %d with a reserve of %d leaves no room for this tenant's thresholds (auto-compact %d, warning %d, error %d, blocking %d)",
		l.Window, l.Reserve, l.AutoCompact, l.Warning, l.Error, l.Blocking)
	if least <= int(MaxWindow) {
		detail += fmt.Sprintf("; the smallest window that works is %d", least)
	}
	return &WindowError{Field: field, Detail: detail}
}

// roomy reports whether every threshold is above zero.
func (l Limits) roomy() bool {
	return l.AutoCompact > 0 && l.Warning > 0 && l.Error > 0 && l.Blocking > 0
}

// State is where a count stands against the thresholds.
type State string

// The states, from least to most severe.
const (
	StateOK          State = "ok"
	StateWarning     State = "warning"
	StateError       State = "error"
	StateAutoCompact State = "autocompact"
	StateBlocking    State = "blocking"
)

// Rank orders the states by severity: ok 0 … blocking 4; an unknown state is −1.
func (s State) Rank() int {
	switch s {
	case StateOK:
		return 0
	case StateWarning:
		return 1
	case StateError:
		return 2
	case StateAutoCompact:
		return 3
	case StateBlocking:
		return 4
	}
	return -1
}

// State is the most severe state whose threshold count has reached (count >= threshold).
func (l Limits) State(count int64) State {
	switch {
	case count >= l.Blocking:
		return StateBlocking
	case count >= l.AutoCompact:
		return StateAutoCompact
	case count >= l.Error:
		return StateError
	case count >= l.Warning:
		return StateWarning
	}
	return StateOK
}

// AboveAutoCompact reports whether compaction must happen before the next API call.
func (l Limits) AboveAutoCompact(count int64) bool {
	return count >= l.AutoCompact
}

// PercentLeft is the percentage of the auto-compact threshold still free,
// 100 · (auto-compact − count) / auto-compact: 100 for an empty session,
// 0 at the threshold and beyond.
func (l Limits) PercentLeft(count int64) float64 {
	if l.AutoCompact <= 0 || count >= l.AutoCompact {
		return 0
	}
	return 100 * float64(l.AutoCompact-count) / float64(l.AutoCompact)
}
