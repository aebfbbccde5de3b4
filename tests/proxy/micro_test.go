package proxy_test

import (
	"context"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// toolLoop is an agent's session through Mnemos, in front of a scripted
// upstream whose model calls one tool every round.
type toolLoop struct {
	t       *testing.T
	up      *upstream.Upstream
	m       *mnemos
	session string
	client  sdk.Client
	msgs    []sdk.MessageParam
}

// smallMicro are tenant settings that micro-compact small sessions: the
// warning at 6,000 tokens (auto-compaction at 5% of the effective window,
// 9,000, less the buffer); results cleared by size keep the latest one and
// must save 1,000 tokens.
const smallMicro = `{
	"tokens": {"auto_compact_percent": 5, "warning_buffer": 3000, "error_buffer": 500},
	"micro": {"size_keep": 1, "size_min_saving": 1000}}`

// startToolLoop runs Mnemos under the tenant settings given, in front of
// an upstream that answers every call with a call of tool with input.
func startToolLoop(t *testing.T, session, settings, tool string, input map[string]any) *toolLoop {
	t.Helper()
	up := upstream.Start(t, upstream.Config{})
	up.SetScript(func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Say(upstream.ToolUse(tool, input)), nil
	})
	m := startMnemos(t, up.URL, key)
	require.NoError(t, m.store.SetTenantSettings(context.Background(), tenant, []byte(settings)))
	return &toolLoop{t: t, up: up, m: m, session: session, client: (&system{mnemos: m}).client(session)}
}

// call sends next after the conversation so far and keeps the answer.
func (l *toolLoop) call(next sdk.MessageParam) {
	l.t.Helper()
	l.msgs = append(l.msgs, next)
	answer, err := l.client.Messages.New(context.Background(), sdk.MessageNewParams{Model: model, MaxTokens: 1024, Messages: l.msgs})
	require.NoError(l.t, err)
	l.msgs = append(l.msgs, answer.ToParam())
}

// result answers the model's last tool call with text.
func (l *toolLoop) result(text string) sdk.MessageParam {
	last := l.msgs[len(l.msgs)-1]
	id := last.Content[len(last.Content)-1].OfToolUse.ID
	return sdk.NewUserMessage(sdk.NewToolResultBlock(id, text, false))
}

// TestTheClientsNewMessagesCountForMicroCompaction: the proxy decides
// micro-compaction on the count the call will have, the client's new
// messages included, as it decides the compaction before the call. A tool
// result that takes a session past its warning threshold has the older
// results cleared in the very call that carries it, not only in the next
// one (after the accountant applied it): a client that calls back to back
// gets the same requests as one that waits.
func TestTheClientsNewMessagesCountForMicroCompaction(t *testing.T) {
	t.Parallel()
	const session = "back-to-back"
	l := startToolLoop(t, session, smallMicro, "Bash", map[string]any{"command": "make test"})
	st, call, result := l.m.store, l.call, l.result

	call(userText("Run the tests until they pass."))
	waitApplied(t, st, session, 1)
	call(result(strings.Repeat("ok  \tpkg/a\t0.1s\n", 200))) // about 1,100 tokens, the result to clear
	waitApplied(t, st, session, 2)
	call(result("FAIL pkg/b"))
	sess := waitApplied(t, st, session, 3)
	warning := thresholds(t, l.m.api.URL, key, session).Warning
	require.Less(t, sess.TokenCount, warning, "the premise: the stored session is under its warning threshold")

	// This result takes the call past the warning threshold, and stays
	// under the auto-compaction threshold (3,000 tokens above it), however
	// the session's factors count tool output.
	line := "--- FAIL: TestB (0.00s)\n    b_test.go:12: want 3, got 4\n"
	big := line
	for sess.TokenCount+tokens.EstimateContent(turn.Content{{Type: turn.BlockText, Text: big}}) < warning+1000 {
		big += line
	}
	call(result(big))
	calls := l.up.Messages()
	sent := calls[len(calls)-1].Request
	var cleared []string
	for _, msg := range sent.Messages {
		for _, b := range msg.Blocks() {
			if b.Type == "tool_result" && strings.Contains(string(b.Content), assembly.ClearedText) {
				cleared = append(cleared, b.ToolUseID)
			}
		}
	}
	require.Len(t, cleared, 1, "the first result is cleared in the call that crosses the warning threshold")
	require.Zero(t, compactionsBeforeTheCall(t, st, session), "the call stayed under the auto-compaction threshold")
}

// TestUsageMeasuredBeforeAMicroCompactionIsStale: a round answered before a
// micro-compaction but applied after it (the client called again before the
// accountant caught up) measured the results the micro-compaction cleared.
// Taken as the session's size, that usage would put them back in the count
// and teach the factors that the round's messages cost several times their
// estimate; it is counted by the estimate, as usage from before a
// compaction is, and the factors learn from the round after.
func TestUsageMeasuredBeforeAMicroCompactionIsStale(t *testing.T) {
	t.Parallel()
	const session = "stale-after-micro"
	l := startToolLoop(t, session, smallMicro, "Read", map[string]any{"file_path": "/srv/notes.txt"})
	m, st, call, result := l.m, l.m.store, l.call, l.result
	prose := func(n int) string {
		return strings.Repeat("The notes say the release waits for the review. ", n/48+1)[:n]
	}

	call(userText("Read the notes and tell me what blocks the release."))
	waitApplied(t, st, session, 1)
	call(result(prose(12_000))) // 3,000 tokens: the result to clear
	waitApplied(t, st, session, 2)
	call(result(prose(400))) // the latest result, which clearing keeps
	sess := waitApplied(t, st, session, 3)
	warning := thresholds(t, m.api.URL, key, session).Warning
	require.Less(t, sess.TokenCount, warning, "the premise: the stored session is under its warning threshold")

	// The accountant falls behind: the next round is answered, measured with
	// the first result in it, and not applied.
	m.accountant.hold()
	call(result(prose(2_000)))
	// This one takes the call past the warning threshold: the first result
	// is cleared before it goes up.
	call(result(prose(int(4 * (warning - sess.TokenCount)))))
	calls := l.up.Messages()
	require.True(t, strings.Contains(string(calls[len(calls)-1].Body), assembly.ClearedText), "the premise: the call that crossed cleared a result")

	m.accountant.release()
	sess = waitApplied(t, st, session, 5)
	require.InDelta(t, 1, sess.EstimateFactor, 0.1, "prose costs what its estimate says, before and after the clearing")
	last := calls[len(calls)-1].Usage
	require.InDelta(t, last.InputSide()+last.OutputTokens, sess.TokenCount, 200, "the count is the last call's measure")
}
