package tenantcfg

import (
	"errors"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
)

// SessionMemory holds a tenant's session-notes settings (see docs/compaction.md).
type SessionMemory struct {
	// Enabled turns the notes on for the tenant's sessions.
	Enabled bool `json:"enabled"`
	// Subagents writes notes for every agent's thread of a proxied session
	// too; by default only the main agent's are kept.
	Subagents bool `json:"subagents"`
	// InitTokens is the count at which a session's notes are first written.
	InitTokens int64 `json:"init_tokens"`
	// UpdateTokens is how much the count must grow after an update before
	// the next one; always required.
	UpdateTokens int64 `json:"update_tokens"`
	// UpdateToolCalls is how many tool calls since the last update also
	// allow the next one (a response without tool calls always does).
	UpdateToolCalls int64 `json:"update_tool_calls"`
	// SectionTokens and TotalTokens bound a section and the whole notes:
	// the update prompt asks for them, and notes used as a compaction
	// summary are cut to them.
	SectionTokens int64 `json:"section_tokens"`
	TotalTokens   int64 `json:"total_tokens"`
	// Template is the tenant's notes template ("" means the default): the
	// ten fixed headings, in order, each with an italic description line.
	Template string `json:"template,omitempty"`
	// Prompt is the tenant's update instructions ("" means the default),
	// with {{name}} variables (sessionnotes.PromptVariables).
	Prompt string `json:"prompt,omitempty"`
}

// DefaultSessionMemory holds the design's numbers.
func DefaultSessionMemory() SessionMemory {
	return SessionMemory{
		Enabled:         true,
		InitTokens:      10_000,
		UpdateTokens:    5_000,
		UpdateToolCalls: 3,
		SectionTokens:   2_000,
		TotalTokens:     12_000,
	}
}

// Validate reports settings that cannot work.
func (s SessionMemory) Validate() error {
	var errs []error
	if s.InitTokens < 0 || s.UpdateTokens < 0 || s.UpdateToolCalls < 0 {
		errs = append(errs, fmt.Errorf("session_memory: init_tokens, update_tokens and update_tool_calls must not be negative, got %d, %d, %d",
			s.InitTokens, s.UpdateTokens, s.UpdateToolCalls))
	}
	if s.SectionTokens <= 0 || s.TotalTokens < s.SectionTokens {
		errs = append(errs, fmt.Errorf("session_memory: want 0 < section_tokens <= total_tokens, got %d and %d", s.SectionTokens, s.TotalTokens))
	}
	if s.Template != "" {
		if _, err := sessionnotes.ParseTemplate(s.Template); err != nil {
			errs = append(errs, fmt.Errorf("session_memory: %w", err))
		}
	}
	if s.Prompt != "" {
		if err := sessionnotes.ValidatePrompt(s.Prompt); err != nil {
			errs = append(errs, fmt.Errorf("session_memory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// TemplateText is the tenant's template, or the default.
func (s SessionMemory) TemplateText() string {
	if s.Template == "" {
		return sessionnotes.DefaultTemplate
	}
	return s.Template
}
