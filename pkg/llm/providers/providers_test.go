package providers_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/llm/openai"
	"github.com/mnemos-ai/mnemos/pkg/llm/providers"
)

func TestKind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  providers.Config
		want string
	}{
		{"nothing configured", providers.Config{}, "builtin"},
		{"anthropic key", providers.Config{Anthropic: anthropic.Config{APIKey: "a"}, OpenAI: openai.Config{APIKey: "o"}}, "anthropic"},
		{"openai key", providers.Config{OpenAI: openai.Config{APIKey: "o"}}, "openai"},
		{"local server", providers.Config{OpenAI: openai.Config{BaseURL: "http://127.0.0.1:11434/v1"}}, "openai"},
		{"a model alone chooses nothing", providers.Config{Anthropic: anthropic.Config{Model: "m"}}, "builtin"},
		{"explicit", providers.Config{Provider: "builtin", Anthropic: anthropic.Config{APIKey: "a"}}, "builtin"},
	} {
		require.Equal(t, tc.want, tc.cfg.Kind(), tc.name)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	handlers := map[llm.Task]builtin.Handler{llm.TaskNotes: func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{Text: "notes"}, nil
	}}
	for _, tc := range []struct {
		cfg  providers.Config
		want string
	}{
		{providers.Config{}, "builtin"},
		{providers.Config{Anthropic: anthropic.Config{APIKey: "a"}}, "anthropic"},
		{providers.Config{OpenAI: openai.Config{BaseURL: "http://127.0.0.1:8000/v1"}}, "openai"},
	} {
		p, err := providers.New(tc.cfg, handlers)
		require.NoError(t, err)
		require.Equal(t, tc.want, p.Name())
	}

	p, err := providers.New(providers.Config{}, handlers)
	require.NoError(t, err)
	resp, err := p.Complete(context.Background(), llm.Request{Task: llm.TaskNotes})
	require.NoError(t, err)
	require.Equal(t, "notes", resp.Text, "the builtin provider answers with the handlers given")

	for _, bad := range []providers.Config{
		{Provider: "gemini"},
		{Provider: "anthropic"}, // no key
		{Provider: "openai", OpenAI: openai.Config{BaseURL: "::not a url"}},
	} {
		_, err := providers.New(bad, nil)
		require.Error(t, err, "%+v", bad)
	}
}

func TestModelsListsWhatTheProviderCalls(t *testing.T) {
	t.Parallel()
	require.Nil(t, providers.Config{}.Models(), "builtin calls no model")
	cfg := providers.Config{Anthropic: anthropic.Config{APIKey: "k", Models: llm.Models{llm.TaskRecall: "claude-haiku-4-5", llm.TaskNotes: "claude-haiku-4-5"}}}
	require.Equal(t, []string{anthropic.DefaultModel, "claude-haiku-4-5"}, cfg.Models())
	cfg = providers.Config{OpenAI: openai.Config{BaseURL: "http://vllm:8000/v1", Model: "llama3.1:70b"}}
	require.Equal(t, []string{"llama3.1:70b"}, cfg.Models())
}

func TestEveryDefaultModelHasAPrice(t *testing.T) {
	t.Parallel()
	for _, model := range []string{anthropic.DefaultModel, openai.DefaultModel} {
		_, ok := llm.DefaultPrices().Lookup(model)
		require.True(t, ok, "%s, a provider's default model, has a list price: its calls count against budgets in money", model)
	}
}
