package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/stretchr/testify/require"
)

// logPage is a page of a service's log as a Read tool returns it: about n
// bytes of prose, which the estimate and the scripted upstream both count
// at 4 bytes a token.
func logPage(page, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Page %d, entry %d: the worker restarted after its health check went unanswered for a while. ", page, i)
	}
	return b.String()[:n]
}

// TestRoundsSentBackToBack: a client that sends its rounds faster than the
// accountant applies them holds messages the session has not stored. The
// proxy counts them as the rounds that will bring them, each round's tool
// results offloaded on their own as the accountant offloads them: five
// results, each under the offload's threshold, are all counted, not four of
// them as if one turn had brought them all past the turn's cap. When they
// take the call over the auto-compact threshold the session is compacted
// first, and the rounds the accountant applied while the compaction ran go
// up once, as the session stores them, not again as the client sent them.
func TestRoundsSentBackToBack(t *testing.T) {
	t.Parallel()
	// Auto-compaction at 30% of the effective window: 54,000 tokens.
	const session = "back-to-back-results"
	l := startToolLoop(t, session, `{"tokens":{"auto_compact_percent":30}}`, "Read", map[string]any{"file_path": "/var/log/worker.log"})
	m, st, c, ctx := l.m, l.m.store, l.client, context.Background()
	l.call(userText("Read the worker's log until you know why it restarts."))
	waitApplied(t, st, session, 1)
	threshold := thresholds(t, m.api.URL, key, session).AutoCompact
	require.EqualValues(t, 54_000, threshold)

	// From here the accountant and the compactor fall behind: every round
	// waits in the bus, unapplied, and so does the compaction asked for.
	m.accountant.hold()
	m.compactor.hold()
	// 11,250 tokens a result: the fifth takes the call over the threshold.
	// Counted as one turn, the results would pass the turn's cap of
	// 200,000 characters and all but four would count as previews, 500
	// tokens each: never over it in the rounds this test sends.
	const resultBytes = 45_000
	answered := int64(1)
	for compacted := false; !compacted; {
		require.Less(t, answered, int64(12), "no compaction before the call in %d rounds", answered)
		l.msgs = append(l.msgs, l.result(logPage(int(answered), resultBytes)))
		params := sdk.MessageNewParams{Model: model, MaxTokens: 1024, Messages: l.msgs}
		var answer *sdk.Message
		done := make(chan error, 1)
		go func() {
			a, err := c.Messages.New(ctx, params)
			if err == nil {
				answer = a
			}
			done <- err
		}()
		for waiting := true; waiting; {
			select {
			case err := <-done:
				require.NoError(t, err)
				waiting = false
			case <-time.After(20 * time.Millisecond):
				if compacted || compactionsBeforeTheCall(t, st, session) == 0 {
					continue
				}
				// The proxy waits for the compaction it asked for. The
				// accountant catches up first: the session stores every
				// round answered before this one.
				compacted = true
				m.accountant.release()
				waitApplied(t, st, session, answered)
				m.compactor.release()
			}
		}
		l.msgs = append(l.msgs, answer.ToParam())
		answered++
	}
	require.EqualValues(t, 5, answered-1, "the fifth result took the call over the threshold")

	calls := l.up.Messages()
	sent := calls[len(calls)-1]
	seen := map[string]int{}
	for _, msg := range sent.Request.Messages {
		for _, b := range msg.Blocks() {
			if b.Type == "tool_result" {
				seen[b.ToolUseID]++
				require.Equal(t, 1, seen[b.ToolUseID], "tool result %s went up twice", b.ToolUseID)
			}
		}
	}
	require.Less(t, sent.Usage.InputSide(), threshold, "the compacted call is under the threshold")
}
