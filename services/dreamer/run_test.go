package dreamer_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/services/dreamer"
)

// TestASummaryWithNULIsRecorded: a model whose closing summary holds NUL
// characters (which Postgres text cannot hold) still ends its dream
// completed, its change applied and its summary recorded without them,
// rather than leaving the dream running until its lease runs out.
func TestASummaryWithNULIsRecorded(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		h.seed(name, "about "+name, "body "+name)
	}
	provider, _ := scripted(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.Messages) == 1 {
			return llmtest.Reply{ToolCalls: []llm.ToolCall{toolCall(memtools.ToolEdit, map[string]string{"name": "a", "old_string": "body a", "new_string": "body a, corrected"})}}
		}
		return llmtest.Text("Corrected\x00 a.")
	})
	h.service(fast("nul"), provider, dreamer.Options{})
	var body api.Dream
	require.Equal(t, http.StatusAccepted, h.call(http.MethodPost, "/v1/scopes/user:u-42/dream", &body))
	d := h.dream(body.ID, "completed")
	require.Equal(t, "Corrected a.", d.Summary)
	require.Equal(t, []string{"a"}, d.Written)
	m, err := h.memories.Get(context.Background(), tenant, scope, "a")
	require.NoError(t, err)
	require.Equal(t, "body a, corrected", m.Body)
	require.Empty(t, h.scopeState().LeaseHolder)
}
