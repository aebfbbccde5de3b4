// Package providers builds the llm.Provider a process is configured for. It
// lives apart from package llm because it imports every implementation,
// which all import llm.
package providers

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/llm/openai"
)

// Config chooses and configures a provider. It is a plain struct: the
// command maps its environment to it.
type Config struct {
	// Provider is "anthropic", "openai" or "builtin"; "" chooses by what
	// is configured (see Kind).
	Provider  string
	Anthropic anthropic.Config
	OpenAI    openai.Config
}

// Kind is the provider cfg selects: cfg.Provider when set; else anthropic when
// an Anthropic key is set, else openai when an OpenAI key or base URL is
// set, else builtin.
func (cfg Config) Kind() string {
	switch {
	case cfg.Provider != "":
		return cfg.Provider
	case cfg.Anthropic.APIKey != "":
		return anthropic.Name
	case cfg.OpenAI.APIKey != "" || cfg.OpenAI.BaseURL != "":
		return openai.Name
	default:
		return builtin.Name
	}
}

// Models lists the models the selected provider calls: its default model
// (the provider's own default when none is set) and each task's, without
// repeats; none for builtin.
func (cfg Config) Models() []string {
	var def string
	var per llm.Models
	switch cfg.Kind() {
	case anthropic.Name:
		def, per = cmp.Or(cfg.Anthropic.Model, anthropic.DefaultModel), cfg.Anthropic.Models
	case openai.Name:
		def, per = cmp.Or(cfg.OpenAI.Model, openai.DefaultModel), cfg.OpenAI.Models
	default:
		return nil
	}
	out := []string{def}
	for _, task := range llm.Tasks {
		if m := per[task]; m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// New returns the provider cfg selects. The builtin provider answers with
// handlers (other providers ignore them). Wrap the result in llm.Guard for
// retries, timeouts, budgets and usage records.
func New(cfg Config, handlers map[llm.Task]builtin.Handler) (llm.Provider, error) {
	switch kind := cfg.Kind(); kind {
	case anthropic.Name:
		p, err := anthropic.New(cfg.Anthropic)
		if err != nil {
			return nil, fmt.Errorf("providers.New: %w", err)
		}
		return p, nil
	case openai.Name:
		p, err := openai.New(cfg.OpenAI)
		if err != nil {
			return nil, fmt.Errorf("providers.New: %w", err)
		}
		return p, nil
	case builtin.Name:
		return builtin.New(handlers), nil
	default:
		return nil, fmt.Errorf("providers.New: unknown provider %q: want anthropic, openai or builtin", kind)
	}
}
