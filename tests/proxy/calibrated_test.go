package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// code is about n bytes of source, which the estimate counts at 3 bytes a
// token and the scripted upstream at 4.
func code(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "\ttotal += weights[%d] * (x - %d); // step %d\n", i%97, i%13, i)
	}
	return b.String()[:n]
}

// TestTheProxyCountsNewMessagesAsTheAccountantDoes: the proxy decides
// whether to compact before the call on the session's count plus the
// client's new messages, counted as the accountant will count them — by
// the factor the session's responses taught for each kind of content. A
// session of code learns that its code costs about three quarters of the
// raw estimate; a message whose raw estimate would take it over the
// auto-compact threshold, but whose counted size (and the upstream's own)
// stays under it, goes up as sent. A message the learnt count takes over
// is compacted first.
func TestTheProxyCountsNewMessagesAsTheAccountantDoes(t *testing.T) {
	t.Parallel()
	up, st, m := startNoted(t)
	ctx := context.Background()
	// Auto-compaction at 5% of the model's effective window: 9,000 tokens.
	require.NoError(t, st.SetTenantSettings(ctx, tenant,
		[]byte(`{"tokens":{"auto_compact_percent":5,"warning_buffer":1000,"error_buffer":500}}`)))
	const session = "calibrated"
	client := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(m.api.URL), option.WithAPIKey(key),
		option.WithMaxRetries(0), option.WithHeader("X-Mnemos-Session", session))
	var msgs []sdk.MessageParam
	send := func(text string) {
		t.Helper()
		msgs = append(msgs, userText(text))
		answer, err := client.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 1024, Messages: msgs})
		require.NoError(t, err)
		msgs = append(msgs, answer.ToParam())
	}

	send("Here is the module I am working on.")
	waitApplied(t, st, session, 1)
	send(code(6_000)) // the growth the response measures teaches the factor
	sess := waitApplied(t, st, session, 2)
	threshold := thresholds(t, m.api.URL, key, session).AutoCompact
	require.Less(t, sess.DenseFactor, 0.85, "the session learnt that its code costs less than estimated")
	require.Less(t, sess.TokenCount, threshold/4)

	// Raw, this message takes the session 4% over the threshold.
	over := code(int(3 * (threshold - sess.TokenCount + threshold/25)))
	raw := tokens.EstimateContent(turn.Content{{Type: turn.BlockText, Text: over}})
	require.GreaterOrEqual(t, sess.TokenCount+raw, threshold, "the premise: the raw estimate crosses")
	send(over)
	require.Zero(t, compactionsBeforeTheCall(t, st, session), "a request counted under the threshold went up without a compaction")
	calls := up.Messages()
	require.Less(t, calls[len(calls)-1].Usage.InputSide(), threshold, "the upstream too counted it under the threshold")
	sess = waitApplied(t, st, session, 3)
	require.Less(t, sess.TokenCount, threshold)

	// Counted with the learnt factor, this one crosses: its raw estimate
	// is half as much again as the room left, 4% more.
	send(code(int(9 * (threshold - sess.TokenCount + threshold/25) / 2)))
	require.EqualValues(t, 1, compactionsBeforeTheCall(t, st, session), "a request counted over the threshold is compacted first")
}
