package proxy_test

import (
	"context"
	"fmt"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// TestTheBodysSessionWinsOverTheHeader: a request whose body names a
// session in metadata.user_id (as Claude Code's does) is that session's,
// whatever X-Mnemos-Session says: managed with its context and recorded as
// its round. Managed with the header's session's context — six rounds
// stored, against the one its messages follow — the request would look
// rewound and go up unmanaged and unrecorded.
func TestTheBodysSessionWinsOverTheHeader(t *testing.T) {
	t.Parallel()
	s := setup(t, func(req llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: fmt.Sprintf("answer %d", len(req.Messages)), Usage: llm.Usage{InputTokens: 100, OutputTokens: 5}}
	})
	ctx := context.Background()
	round := func(c sdk.Client, msgs []sdk.MessageParam, metadata sdk.MetadataParam) []sdk.MessageParam {
		t.Helper()
		answer, err := c.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 256, Messages: msgs, Metadata: metadata})
		require.NoError(t, err)
		return append(msgs, answer.ToParam())
	}
	var long []sdk.MessageParam
	for i := range 6 {
		long = round(s.client("long"), append(long, userText(fmt.Sprintf("step %d of the long task", i))), sdk.MetadataParam{})
	}
	short := round(s.client("short"), []sdk.MessageParam{userText("a short question")}, sdk.MetadataParam{})
	s.applied(t, "long", 6)
	s.applied(t, "short", 1)

	// The header names "long"; the body's metadata names "short".
	round(s.client("long"), append(short, userText("and a follow-up")),
		sdk.MetadataParam{UserID: sdk.String(`{"session_id":"short"}`)})
	sess := s.applied(t, "short", 2)
	require.EqualValues(t, 4, sess.MessageCount, "the round is short's")
	long6, err := s.store.GetSession(ctx, tenant, "long")
	require.NoError(t, err)
	require.EqualValues(t, 6, long6.AppliedSeq, "long has no round more")
	require.EqualValues(t, 12, long6.MessageCount)
	require.Zero(t, s.metrics.Sum("mnemos.proxy.requests", "outcome", "diverged"))
	require.EqualValues(t, 8, s.metrics.Sum("mnemos.proxy.requests", "outcome", "managed"), "every round managed")
	calls := s.upstream.Requests()
	require.Len(t, calls[len(calls)-1].Messages, 3, "short's stored messages and the new one went up")
}
