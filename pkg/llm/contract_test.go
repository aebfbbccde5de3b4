package llm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/llm/openai"
)

// The same contract, run against every provider.
func TestContract(t *testing.T) {
	t.Parallel()

	t.Run("anthropic", func(t *testing.T) {
		t.Parallel()
		llmtest.RunContract(t, func(t *testing.T, script llmtest.Script) llm.Provider {
			srv := llmtest.NewAnthropicServer(t, script)
			p, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: srv.URL})
			require.NoError(t, err)
			return p
		})
	})
	t.Run("openai", func(t *testing.T) {
		t.Parallel()
		llmtest.RunContract(t, func(t *testing.T, script llmtest.Script) llm.Provider {
			srv := llmtest.NewOpenAIServer(t, script)
			p, err := openai.New(openai.Config{BaseURL: srv.URL})
			require.NoError(t, err)
			return p
		})
	})
	t.Run("builtin", func(t *testing.T) {
		t.Parallel()
		llmtest.RunContract(t, func(t *testing.T, script llmtest.Script) llm.Provider {
			handlers := map[llm.Task]builtin.Handler{}
			for _, task := range llm.Tasks {
				handlers[task] = llmtest.Handler(script)
			}
			return builtin.New(handlers)
		})
	})
}
