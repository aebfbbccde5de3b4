package dreamer_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/services/dreamer"
)

// TestTranscriptSearchIsNarrow: the model's searches (through the real
// Anthropic SDK) find messages of the scope's own sessions only, newest
// first, at most 50 of them, each a short snippet around the match, never
// the whole message; a search with nothing to look for is refused.
func TestTranscriptSearchIsNarrow(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	h.seed("db", "How the database is run", "Postgres 15.")
	var texts []string
	for i := range 60 {
		texts = append(texts, fmt.Sprintf("Round %d: the postgres migration ran.", i))
	}
	h.session("ours", map[string]string{"user": "u-42", "project": "repo-x"}, texts...)
	long := strings.Repeat("filler words that say nothing at all ", 150) + "the postgres migration 00042 failed on a lock " + strings.Repeat("more filler after the match ", 150)
	h.session("ours-2", map[string]string{"user": "u-42"}, "what happened to the deploy?", long)
	h.session("theirs", map[string]string{"user": "u-7"}, "SECRET: the postgres migration of another user")
	h.session("unscoped", nil, "SECRET: the postgres migration of nobody")

	provider, srv := scripted(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.Messages) == 1 {
			return llmtest.Reply{ToolCalls: []llm.ToolCall{
				toolCall(dreamer.ToolSearch, map[string]any{"query": "postgres migration"}),
				toolCall(dreamer.ToolSearch, map[string]any{"query": "\"migration 00042\" lock", "limit": 5}),
				toolCall(dreamer.ToolSearch, map[string]any{"query": "  "}),
				toolCall(dreamer.ToolSearch, map[string]any{"query": "!!! ???"}),
				toolCall(dreamer.ToolSearch, map[string]any{"query": "postgres", "everything": true}),
				toolCall(dreamer.ToolSearch, map[string]any{"query": "kubernetes"}),
			}}
		}
		return llmtest.Text("Nothing to change.")
	})
	h.service(fast("search"), provider, dreamer.Options{})
	var body api.Dream
	require.Equal(t, http.StatusAccepted, h.call(http.MethodPost, "/v1/scopes/user:u-42/dream", &body))
	d := h.dream(body.ID, "completed")
	require.Equal(t, 6, d.ToolCalls)
	require.Equal(t, 3, d.ToolErrors)

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	results := strings.Split(lastUserText(reqs[1]), "[tool_result ")
	require.Len(t, results, 7, lastUserText(reqs[1]))
	broad, narrow := results[1], results[2]

	require.Contains(t, broad, "50 messages of the sessions of user:u-42 match")
	require.Equal(t, 50, strings.Count(broad, "\n- "), "at most 50 hits")
	require.Contains(t, broad, "«postgres» «migration»")
	require.NotContains(t, broad, "SECRET", "other scopes' sessions are not searched")
	require.Contains(t, broad, "session ours, message 59", "newest first")

	require.Contains(t, narrow, "1 messages of the sessions of user:u-42 match")
	require.Contains(t, narrow, "session ours-2, message 1")
	require.Contains(t, narrow, "«migration» «00042»")
	for _, line := range strings.Split(narrow, "\n")[1:] {
		require.Less(t, utf8.RuneCountInString(line), 500, "a snippet, not the message: %q", line)
	}
	require.Less(t, len(narrow), len(long)/10)

	require.Contains(t, results[3], "(error)")
	require.Contains(t, results[3], "needs a query")
	require.Contains(t, results[4], "holds no word to search for")
	require.Contains(t, results[5], "unknown field")
	require.Contains(t, results[6], "No message of the sessions of user:u-42 matches")
	require.EqualValues(t, 3, h.metrics.SumAll("mnemos.memories.refused", "actor", "dreamer", "reason", "bad_request"))
}
