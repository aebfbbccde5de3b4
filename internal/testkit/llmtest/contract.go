package llmtest

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// NewProvider builds the provider under test, answering every call as
// script says (over a fake server, or through Handler).
type NewProvider func(t *testing.T, script Script) llm.Provider

// RunContract checks what every llm.Provider must do, on its own and
// through llm.Guard: text, tool calls and JSON answers come back; usage
// surfaces, cache reads and writes included; a prompt too long is
// KindPromptTooLong with its gap; rate limits and server errors are
// retryable kinds, auth and bad requests are not, a garbled answer is
// KindBadResponse; Guard retries a rate
// limit (honouring Retry-After) and records the call once, gives up after
// its bound, refuses a tenant whose budget is spent without calling, and
// times out a call that hangs. Calls use the tenant "acme" and
// llm.TaskCompaction.
func RunContract(t *testing.T, newProvider NewProvider) {
	t.Helper()

	t.Run("text", func(t *testing.T) {
		t.Parallel()
		script, seen := record(Sequence(Text("The cat sat on the mat.")))
		resp, err := newProvider(t, script).Complete(context.Background(), request())
		require.NoError(t, err)
		require.Equal(t, "The cat sat on the mat.", resp.Text)
		require.Equal(t, "end_turn", resp.StopReason)
		require.NotEmpty(t, resp.Model)
		require.Empty(t, resp.ToolCalls)

		got := seen()
		require.Len(t, got, 1)
		require.Equal(t, "You summarize conversations.", got[0].System)
		require.Equal(t, []Message{{Role: "user", Text: "Summarize: where did the cat sit?"}}, got[0].Messages)
		require.Equal(t, int64(256), got[0].MaxTokens)
		require.False(t, got[0].JSON)
	})

	t.Run("tool calls", func(t *testing.T) {
		t.Parallel()
		script, seen := record(Sequence(
			Reply{ToolCalls: []llm.ToolCall{
				{ID: "call_a", Name: "lookup", Input: json.RawMessage(`{"key":"cat"}`)},
				{ID: "call_b", Name: "search", Input: json.RawMessage(`{"query":"mat","limit":3}`)},
			}},
			Text("The cat sat on the mat, 42 times."),
		))
		p := newProvider(t, script)
		req := request()
		req.Tools = tools()
		resp, err := p.Complete(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, "tool_use", resp.StopReason)
		require.Len(t, resp.ToolCalls, 2)
		for i, want := range []llm.ToolCall{
			{ID: "call_a", Name: "lookup", Input: json.RawMessage(`{"key":"cat"}`)},
			{ID: "call_b", Name: "search", Input: json.RawMessage(`{"query":"mat","limit":3}`)},
		} {
			require.Equal(t, want.ID, resp.ToolCalls[i].ID)
			require.Equal(t, want.Name, resp.ToolCalls[i].Name)
			require.JSONEq(t, string(want.Input), string(resp.ToolCalls[i].Input))
		}

		// The calls and their results go back in the next request.
		var uses, results turn.Content
		for _, c := range resp.ToolCalls {
			uses = append(uses, turn.Block{Type: turn.BlockToolUse, ID: c.ID, Name: c.Name, Input: c.Input})
			results = append(results, turn.Block{Type: turn.BlockToolResult, ToolUseID: c.ID,
				Content: &turn.Content{{Type: turn.BlockText, Text: "42"}}})
		}
		req.Messages = append(req.Messages,
			llm.Message{Role: "assistant", Content: uses},
			llm.Message{Role: "user", Content: results})
		resp, err = p.Complete(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, "The cat sat on the mat, 42 times.", resp.Text)

		got := seen()
		require.Len(t, got, 2)
		require.Equal(t, []string{"lookup", "search"}, got[0].Tools)
		last := got[1].Messages[len(got[1].Messages)-1]
		require.Contains(t, last.Text, "42")
	})

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		answer := `{"title":"Cats","points":["sat","mat"]}`
		script, seen := record(Sequence(Text(answer), Text("Sure! Here it is.")))
		p := newProvider(t, script)
		req := request()
		req.JSONSchema = json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},` +
			`"points":{"type":"array","items":{"type":"string"}}},"required":["title","points"]}`)
		resp, err := p.Complete(context.Background(), req)
		require.NoError(t, err)
		require.JSONEq(t, answer, resp.Text)
		require.Empty(t, resp.ToolCalls)
		require.Equal(t, "end_turn", resp.StopReason)
		got := seen()
		require.True(t, got[0].JSON)
		require.Empty(t, got[0].Tools)

		// Prose where JSON was asked for is a bad response.
		_, err = p.Complete(context.Background(), req)
		require.Equal(t, llm.KindBadResponse, llm.KindOf(err), "%v", err)
	})

	t.Run("usage", func(t *testing.T) {
		t.Parallel()
		want := llm.Usage{InputTokens: 1200, OutputTokens: 80, CacheReadTokens: 5000, CacheWriteTokens: 300}
		resp, err := newProvider(t, Sequence(Reply{Text: "ok", Usage: want})).Complete(context.Background(), request())
		require.NoError(t, err)
		require.Equal(t, want, resp.Usage)
	})

	t.Run("prompt too long", func(t *testing.T) {
		t.Parallel()
		_, err := newProvider(t, Sequence(PromptTooLong(210_000, 200_000))).Complete(context.Background(), request())
		var e *llm.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, llm.KindPromptTooLong, e.Kind, "%v", err)
		require.Equal(t, int64(10_000), e.Gap)
		require.False(t, llm.Retryable(err))
	})

	t.Run("failures", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name      string
			reply     Reply
			kind      llm.ErrorKind
			retryable bool
		}{
			{"rate limited", RateLimited(), llm.KindRateLimited, true},
			{"server error", ServerError(), llm.KindServer, true},
			{"overloaded", Overloaded(), llm.KindServer, true},
			{"unauthorized", Unauthorized(), llm.KindAuth, false},
			{"bad request", BadRequest(), llm.KindRequest, false},
			{"a body that is not JSON", Garbage("<html>upstream error</html>"), llm.KindBadResponse, false},
			{"a body cut short", Garbage(`{"id": "msg_1", "content": [{"type": "te`), llm.KindBadResponse, false},
			{"an empty body", Garbage(""), llm.KindBadResponse, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				_, err := newProvider(t, Sequence(tc.reply)).Complete(context.Background(), request())
				require.Equal(t, tc.kind, llm.KindOf(err), "%v", err)
				require.Equal(t, tc.retryable, llm.Retryable(err))
			})
		}
	})

	t.Run("guard retries a rate limit", func(t *testing.T) {
		t.Parallel()
		usage := llm.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 7}
		script, seen := record(Sequence(RateLimited(), Reply{Text: "done", Usage: usage}))
		ledger, sleeps := llm.NewMemoryLedger(0), &sleeper{}
		g := llm.Guard(newProvider(t, script), llm.GuardOptions{Budget: ledger, Recorder: ledger, Sleep: sleeps.sleep})
		resp, err := g.Complete(context.Background(), request())
		require.NoError(t, err)
		require.Equal(t, "done", resp.Text)
		require.Equal(t, usage, resp.Usage)
		require.Len(t, seen(), 2)
		require.Len(t, sleeps.all(), 1)

		calls := ledger.Calls()
		require.Len(t, calls, 1)
		require.Equal(t, 2, calls[0].Attempts)
		require.Equal(t, usage, calls[0].Usage)
		require.Equal(t, "acme", calls[0].Tenant)
		require.Equal(t, llm.TaskCompaction, calls[0].Task)
		require.NoError(t, calls[0].Err)
		require.Equal(t, usage.Total(), ledger.Spent("acme"))
	})

	t.Run("guard honours retry-after", func(t *testing.T) {
		t.Parallel()
		limited := RateLimited()
		limited.RetryAfter = 1500 * time.Millisecond
		sleeps := &sleeper{}
		g := llm.Guard(newProvider(t, Sequence(limited, Text("done"))), llm.GuardOptions{Sleep: sleeps.sleep})
		_, err := g.Complete(context.Background(), request())
		require.NoError(t, err)
		require.Equal(t, []time.Duration{1500 * time.Millisecond}, sleeps.all())
	})

	t.Run("guard stops after its bound", func(t *testing.T) {
		t.Parallel()
		script, seen := record(Sequence(ServerError()))
		ledger, sleeps := llm.NewMemoryLedger(0), &sleeper{}
		g := llm.Guard(newProvider(t, script), llm.GuardOptions{MaxAttempts: 3, Recorder: ledger, Sleep: sleeps.sleep})
		_, err := g.Complete(context.Background(), request())
		require.Equal(t, llm.KindServer, llm.KindOf(err), "%v", err)
		require.Len(t, seen(), 3)
		require.Len(t, sleeps.all(), 2)
		calls := ledger.Calls()
		require.Len(t, calls, 1)
		require.Equal(t, 3, calls[0].Attempts)
		require.Equal(t, llm.KindServer, calls[0].ErrorKind)
	})

	t.Run("guard refuses a spent budget", func(t *testing.T) {
		t.Parallel()
		script, seen := record(Sequence(Text("never")))
		ledger := llm.NewMemoryLedger(1000)
		require.NoError(t, ledger.Record(context.Background(), llm.Call{Tenant: "acme", Usage: llm.Usage{InputTokens: 1000}}))
		g := llm.Guard(newProvider(t, script), llm.GuardOptions{Budget: ledger, Recorder: ledger})
		_, err := g.Complete(context.Background(), request())
		require.Equal(t, llm.KindBudget, llm.KindOf(err), "%v", err)
		require.ErrorIs(t, err, llm.ErrBudgetExhausted)
		require.Empty(t, seen())
		require.Len(t, ledger.Calls(), 1, "only the spending recorded above")
	})

	t.Run("guard times out a hung call", func(t *testing.T) {
		t.Parallel()
		script, seen := record(Sequence(Hang()))
		ledger, sleeps := llm.NewMemoryLedger(0), &sleeper{}
		g := llm.Guard(newProvider(t, script), llm.GuardOptions{Timeout: 200 * time.Millisecond, MaxAttempts: 2, Recorder: ledger, Sleep: sleeps.sleep})
		_, err := g.Complete(context.Background(), request())
		require.Equal(t, llm.KindTimeout, llm.KindOf(err), "%v", err)
		calls := ledger.Calls()
		require.Len(t, calls, 1)
		require.Equal(t, 2, calls[0].Attempts, "the timed-out attempt is retried once")
		require.Equal(t, llm.KindTimeout, calls[0].ErrorKind)
		require.Len(t, sleeps.all(), 1)
		// On a busy machine an attempt may time out before its request
		// reaches the server, so the server sees one or two.
		require.NotEmpty(t, seen())
		require.LessOrEqual(t, len(seen()), 2)
	})
}

// request is the contract's call.
func request() llm.Request {
	return llm.Request{
		Tenant:    "acme",
		Task:      llm.TaskCompaction,
		System:    "You summarize conversations.",
		Messages:  []llm.Message{{Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "Summarize: where did the cat sit?"}}}},
		MaxTokens: 256,
	}
}

func tools() []llm.Tool {
	return []llm.Tool{
		{Name: "lookup", Description: "Look a key up.", InputSchema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`)},
		{Name: "search", Description: "Search.", InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}}}`)},
	}
}

// record wraps script to keep every request it answers.
func record(script Script) (Script, func() []Request) {
	var (
		mu   sync.Mutex
		seen []Request
	)
	wrapped := func(r Request) Reply {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		return script(r)
	}
	return wrapped, func() []Request {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// sleeper is a Guard's Sleep that returns at once and remembers the delays.
type sleeper struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeper) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.delays)
}
