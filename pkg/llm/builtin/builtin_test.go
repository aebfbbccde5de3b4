package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func answer(resp llm.Response, err error) builtin.Handler {
	return func(context.Context, llm.Request) (llm.Response, error) { return resp, err }
}

func notes(content string) llm.Request {
	return llm.Request{Task: llm.TaskNotes, Messages: []llm.Message{{Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: content}}}}}
}

func TestUnsupportedTask(t *testing.T) {
	t.Parallel()
	p := builtin.New(map[llm.Task]builtin.Handler{llm.TaskNotes: answer(llm.Response{Text: "x"}, nil), llm.TaskRecall: nil})
	require.Equal(t, "builtin", p.Name())
	for _, task := range []llm.Task{llm.TaskCompaction, llm.TaskRecall} {
		_, err := p.Complete(context.Background(), llm.Request{Task: task})
		require.Equal(t, llm.KindUnsupported, llm.KindOf(err), "task %s", task)
	}
}

func TestDispatchAndDefaults(t *testing.T) {
	t.Parallel()
	var got llm.Request
	handlers := map[llm.Task]builtin.Handler{
		llm.TaskNotes: func(_ context.Context, req llm.Request) (llm.Response, error) {
			got = req
			return llm.Response{Text: "hello world!"}, nil
		},
		llm.TaskExtraction: answer(llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "ls", Input: json.RawMessage(`{}`)}}}, nil),
		llm.TaskRecall:     answer(llm.Response{Text: "kept", Model: "bm25", StopReason: "max_tokens", Usage: llm.Usage{InputTokens: 1}}, nil),
	}
	p := builtin.New(handlers)
	delete(handlers, llm.TaskNotes) // New copied the map

	req := notes("0123456789")
	req.System = "abcdefgh"
	req.Tools = []llm.Tool{{Name: "ls", InputSchema: json.RawMessage(`{}`)}}
	resp, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, req, got, "the handler sees the request as it is")
	require.Equal(t, llm.Response{
		Text: "hello world!", Model: "builtin", StopReason: "end_turn",
		// in: system 8 bytes → 2, text 10 bytes → 3, tool 4 bytes → 1; out: 12 bytes → 3
		Usage: llm.Usage{InputTokens: 6, OutputTokens: 3},
	}, resp)

	req.Task = llm.TaskExtraction
	resp, err = p.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "tool_use", resp.StopReason)
	require.Equal(t, int64(1), resp.Usage.OutputTokens, "a tool call's name and input: 4 bytes → 1")

	req.Task = llm.TaskRecall
	resp, err = p.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, llm.Response{Text: "kept", Model: "bm25", StopReason: "max_tokens", Usage: llm.Usage{InputTokens: 1}}, resp,
		"what the handler set is kept")
}

func TestUsageEstimate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		req      llm.Request
		text     string
		in, outT int64
	}{
		{"empty", llm.Request{Task: llm.TaskNotes}, "", 0, 0},
		{"rounds up", notes("a"), "abcde", 1, 2},
		{"json schema counts", llm.Request{Task: llm.TaskNotes, JSONSchema: json.RawMessage(`{"type":"object"}`)}, `{}`, 5, 1},
		{"image", llm.Request{Task: llm.TaskNotes, Messages: []llm.Message{{Role: "user", Content: turn.Content{{Type: turn.BlockImage}}}}}, "", 2000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := builtin.New(map[llm.Task]builtin.Handler{llm.TaskNotes: answer(llm.Response{Text: tc.text}, nil)})
			resp, err := p.Complete(context.Background(), tc.req)
			require.NoError(t, err)
			require.Equal(t, llm.Usage{InputTokens: tc.in, OutputTokens: tc.outT}, resp.Usage)
		})
	}
}

func TestHandlerErrors(t *testing.T) {
	t.Parallel()
	plain := errors.New("no notes yet")
	typed := &llm.Error{Kind: llm.KindPromptTooLong, Gap: 12}
	for _, tc := range []struct {
		name string
		err  error
		kind llm.ErrorKind
	}{
		{"plain", plain, ""},
		{"typed", typed, llm.KindPromptTooLong},
		{"deadline", context.DeadlineExceeded, llm.KindTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := builtin.New(map[llm.Task]builtin.Handler{llm.TaskNotes: answer(llm.Response{}, tc.err)})
			_, err := p.Complete(context.Background(), notes("x"))
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, tc.kind, llm.KindOf(err))
		})
	}
}

func TestJSONIsChecked(t *testing.T) {
	t.Parallel()
	req := notes("x")
	req.JSONSchema = json.RawMessage(`{"type":"object"}`)
	p := builtin.New(map[llm.Task]builtin.Handler{llm.TaskNotes: answer(llm.Response{Text: "not json"}, nil)})
	resp, err := p.Complete(context.Background(), req)
	require.Equal(t, llm.KindBadResponse, llm.KindOf(err))
	require.NotZero(t, resp.Usage.InputTokens, "a bad answer is still accounted")

	p = builtin.New(map[llm.Task]builtin.Handler{llm.TaskNotes: answer(llm.Response{Text: `{"ok":true}`}, nil)})
	resp, err = p.Complete(context.Background(), req)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, resp.Text)
}

func TestCancelledBeforeTheHandler(t *testing.T) {
	t.Parallel()
	called := false
	p := builtin.New(map[llm.Task]builtin.Handler{llm.TaskNotes: func(context.Context, llm.Request) (llm.Response, error) {
		called = true
		return llm.Response{}, nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Complete(ctx, notes("x"))
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, called)
}
