package llm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// forker records the requests it is given.
type forker struct{ got []llm.Request }

func (f *forker) Name() string { return "forker" }
func (f *forker) Forks() bool  { return true }
func (f *forker) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	f.got = append(f.got, req)
	return llm.Response{Forked: req.Prefix != nil}, nil
}

func TestWithForksGivesTheSessionsRequestToCallsThatAskForked(t *testing.T) {
	t.Parallel()
	f := &forker{}
	var asked []string
	p := llm.WithForks(f, func(_ context.Context, tenant, session string) (*llm.Prefix, error) {
		asked = append(asked, tenant+"/"+session)
		switch session {
		case "known":
			return &llm.Prefix{Model: "m"}, nil
		case "broken":
			return nil, errors.New("the database is away")
		}
		return nil, nil
	})
	ask := turn.Content{{Type: turn.BlockText, Text: "update the notes"}}
	for _, c := range []struct {
		req    llm.Request
		forked bool
	}{
		{llm.Request{Tenant: "acme", Session: "known", Ask: ask}, true},
		{llm.Request{Tenant: "acme", Session: "unknown", Ask: ask}, false},
		{llm.Request{Tenant: "acme", Session: "broken", Ask: ask}, false},
		{llm.Request{Tenant: "acme", Session: "known"}, false}, // nothing to ask forked
		{llm.Request{Tenant: "acme", Ask: ask}, false},         // no session
	} {
		resp, err := p.Complete(context.Background(), c.req)
		require.NoError(t, err)
		require.Equal(t, c.forked, resp.Forked, "%+v", c.req)
	}
	require.Equal(t, []string{"acme/known", "acme/unknown", "acme/broken"}, asked, "looked up only for calls that ask forked")
}

func TestWithForksLeavesAProviderThatCannotForkAlone(t *testing.T) {
	t.Parallel()
	p := builtin.New(nil)
	require.Same(t, llm.Provider(p), llm.WithForks(p, func(context.Context, string, string) (*llm.Prefix, error) {
		t.Fatal("a provider without a cache needs no prefix")
		return nil, nil
	}))
}

func TestForkedCallsReadBackAsTheyWereWritten(t *testing.T) {
	t.Parallel()
	calls := []llm.ToolCall{
		{ID: "a", Name: "memory_write", Input: []byte(`{"name":"x","body":"y"}`)},
		{ID: "b", Name: "memory_list"}, // no input: {}
	}
	got, text, err := llm.ReadForkedCalls(llm.ForkedCalls(calls, "done"), 2)
	require.NoError(t, err)
	require.Equal(t, "done", text)
	require.Equal(t, []llm.ToolCall{
		{ID: "fork_3_1", Name: "memory_write", Input: []byte(`{"name":"x","body":"y"}`)},
		{ID: "fork_3_2", Name: "memory_list", Input: []byte(`{}`)},
	}, got)

	for answer, want := range map[string]string{
		`{"tool_calls": [{"input": {}}]}`: "tool call 1 names no tool",
		`{"tool_calls": {}}`:              "do not read",
	} {
		_, _, err := llm.ReadForkedCalls([]byte(answer), 0)
		require.ErrorContains(t, err, want, answer)
	}
}
