package contextwindow_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
)

// scripted is the Anthropic provider over a local server that answers as
// script says, guarded as in production but without real waits.
func scripted(t *testing.T, script llmtest.Script) (llm.Provider, *llmtest.Server) {
	t.Helper()
	srv := llmtest.NewAnthropicServer(t, script)
	p, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: srv.URL})
	require.NoError(t, err)
	return llm.Guard(p, llm.GuardOptions{
		MaxAttempts: 2,
		Sleep:       func(context.Context, time.Duration) error { return nil },
	}), srv
}

var moduleRe = regexp.MustCompile(`look at module (\d+) and`)

// modules lists the module numbers the user asked about in a request.
func modules(req llmtest.Request) []int {
	var out []int
	for _, m := range req.Messages {
		for _, match := range moduleRe.FindAllStringSubmatch(m.Text, -1) {
			n, _ := strconv.Atoi(match[1])
			out = append(out, n)
		}
	}
	return out
}

func TestPromptTooLongRetriesDropTheOldestRounds(t *testing.T) {
	t.Parallel()
	provider, srv := scripted(t, llmtest.Sequence(
		llmtest.PromptTooLong(215_000, 200_000),
		llmtest.PromptTooLong(203_000, 200_000),
		llmtest.Text("<analysis>first I list what happened</analysis>\n<summary>\n## 1. Primary Request and Intent\nThe user had modules read.\n</summary>"),
	))
	h := setup(t, provider)
	c := h.conversation("ptl")
	grow(t, h, c, func(int) bool { return h.session(t, c.id).CompactionID != "" })

	var got struct {
		Method     string `json:"method"`
		LLMCalls   int    `json:"llm_calls"`
		LLMRetries int    `json:"llm_retries"`
		Summary    string `json:"summary"`
	}
	status, raw := h.get(t, "/v1/compactions/"+h.session(t, c.id).CompactionID, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, events.MethodFull, got.Method)
	require.Equal(t, 3, got.LLMCalls)
	require.Equal(t, 2, got.LLMRetries)
	require.NotContains(t, got.Summary, "first I list", "the analysis is stripped")
	require.Contains(t, got.Summary, "The user had modules read.")

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	for i := 1; i < len(reqs); i++ {
		prev, next := modules(reqs[i-1]), modules(reqs[i])
		require.NotEmpty(t, next)
		require.Greater(t, next[0], prev[0], "retry %d starts at a later round", i)
		require.Equal(t, prev[len(prev)-1], next[len(next)-1], "retry %d keeps the latest rounds", i)
		require.Less(t, len(reqs[i].Messages), len(reqs[i-1].Messages), "retry %d sends fewer messages", i)
	}
	require.True(t, reqs[0].CachedSystem, "the system prompt is marked for the prompt cache")
}

// TestFailingModelOpensTheCircuitAndFallsBack: three failed model
// summaries in a row open the session's circuit; while it cools down,
// automatic compactions ask no model. Past the cool-down the circuit is
// half-open: the next one asks the model once more, a failure opens it for
// another cool-down, and an answer closes it.
func TestFailingModelOpensTheCircuitAndFallsBack(t *testing.T) {
	t.Parallel()
	var answers atomic.Bool
	provider, srv := scripted(t, func(llmtest.Request) llmtest.Reply {
		if answers.Load() {
			return llmtest.Text("<summary>\n## 1. Primary Request and Intent\nThe user had modules read.\n</summary>")
		}
		return llmtest.ServerError()
	})
	h := setup(t, provider)
	sub, err := h.bus.Conn().SubscribeSync(h.bus.Subject(bus.KindCircuitOpened, tenant, "failing"))
	require.NoError(t, err)
	c := h.conversation("failing")

	methods := func() []string {
		var list struct {
			Compactions []struct {
				Status string `json:"status"`
				Method string `json:"method"`
			} `json:"compactions"`
		}
		h.get(t, "/v1/sessions/failing/compactions", &list)
		var out []string
		for _, cp := range list.Compactions {
			require.Equal(t, "completed", cp.Status)
			out = append(out, cp.Method)
		}
		return out
	}
	compactions := func() int {
		for _, m := range methods() {
			require.Equal(t, events.MethodExtractive, m)
		}
		return len(methods())
	}
	grow(t, h, c, func(int) bool { return compactions() == 3 })
	require.Equal(t, 6, srv.Calls(), "two attempts for each of three compactions")
	s := h.session(t, c.id)
	require.True(t, s.CompactCircuitOpen)
	require.Equal(t, 3, s.CompactFailures)
	msg, err := sub.NextMsg(10 * time.Second)
	require.NoError(t, err, "compact.circuit_opened was published")
	require.Contains(t, string(msg.Data), `"failures":3`)
	require.Equal(t, int64(1), h.metrics.Sum("mnemos.compactions.circuit_opened", "", ""))

	// With the circuit open, compactions no longer ask the model, and the
	// session still never reaches the blocking limit (grow checks each round).
	grow(t, h, c, func(int) bool { return compactions() == 4 })
	require.Equal(t, 6, srv.Calls())
	cooling := h.session(t, c.id).CompactCircuitUntil
	require.WithinDuration(t, time.Now().Add(30*time.Minute), cooling, time.Minute, "open for the default cool-down")

	// The cool-down passes (the row says so): the next automatic compaction
	// asks the model, which fails again; the circuit opens for another
	// cool-down, without a second circuit_opened.
	cooled := func() {
		_, err := h.admin.Exec(context.Background(),
			"UPDATE sessions SET compact_circuit_until = now() - interval '1 second' WHERE tenant_id = $1 AND session_id = $2", tenant, c.id)
		require.NoError(t, err)
	}
	cooled()
	grow(t, h, c, func(int) bool { return compactions() == 5 })
	require.Equal(t, 8, srv.Calls(), "the half-open compaction asked the model (two attempts)")
	s = h.session(t, c.id)
	require.True(t, s.CompactCircuitOpen, "the failed try opened the circuit again")
	require.Equal(t, 4, s.CompactFailures)
	require.True(t, s.CompactCircuitUntil.After(time.Now().Add(29*time.Minute)), "for another cool-down")
	require.Equal(t, int64(1), h.metrics.Sum("mnemos.compactions.circuit_opened", "", ""))

	// Cooled down again, with the model answering: the circuit closes.
	answers.Store(true)
	cooled()
	grow(t, h, c, func(int) bool { return len(methods()) == 6 })
	require.Equal(t, events.MethodFull, methods()[5], "the half-open compaction's summary is the model's")
	s = h.session(t, c.id)
	require.False(t, s.CompactCircuitOpen, "the answer closed the circuit")
	require.Zero(t, s.CompactFailures)
	require.True(t, s.CompactCircuitUntil.IsZero())
}

// TestASummaryThatMakesNoProgressIsNotUsed: a model summary that saves less
// than compaction.min_saving_percent (10%) of the session's count is not a
// success: the funnel goes on to the extractive summary, and the
// compaction says why.
func TestASummaryThatMakesNoProgressIsNotUsed(t *testing.T) {
	t.Parallel()
	// About 18,000 tokens: within what the model may write, and more than
	// the session it summarizes holds.
	bloated := "<summary>\n" + strings.Repeat("Everything that happened, at length. ", 2_000) + "\n</summary>"
	provider, srv := scripted(t, func(llmtest.Request) llmtest.Reply { return llmtest.Text(bloated) })
	h := setup(t, provider)
	c := h.conversation("bloated")
	grow(t, h, c, func(round int) bool { return round == 2 })
	pre := h.session(t, c.id).TokenCount
	require.Less(t, pre, int64(20_000))

	var compacted compactAnswer
	status, raw := h.call(t, http.MethodPost, "/v1/sessions/bloated/compact", `{}`, &compacted)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, 1, srv.Calls(), "the model answered")
	var got struct {
		Method     string `json:"method"`
		Error      string `json:"error"`
		PostTokens int64  `json:"post_tokens"`
	}
	status, raw = h.get(t, "/v1/compactions/"+h.session(t, c.id).CompactionID, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, events.MethodExtractive, got.Method, "the next step of the funnel")
	require.Contains(t, got.Error, "the model summary was not used: the result saves")
	require.Less(t, got.PostTokens, int64(18_000), "smaller than what the model wrote")
	require.Equal(t, int64(1), h.metrics.Sum("mnemos.compactions.no_progress", "method", events.MethodFull))
}
