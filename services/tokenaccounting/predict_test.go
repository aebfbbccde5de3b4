package tokenaccounting_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// TestPredictionState: the accountant keeps what the next prediction needs
// with the session: the request prefix's estimate and hash (then reused by
// hash alone), the calibration factor the responses taught, a count that
// starts over at the client's compaction and is counted by its estimate
// after a model change.
func TestPredictionState(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	const id = "predict"
	system := json.RawMessage(`"` + strings.Repeat("You are a careful coding agent. ", 200) + `"`)
	tools := json.RawMessage(`[{"name":"Bash","description":"Runs a shell command.","input_schema":{"type":"object"}}]`)
	prefix, _, err := tokens.EstimatePrefix(turn.RequestPrefix{System: system, Tools: tools})
	require.NoError(t, err)

	user := func(uuid string, text string) turn.Message {
		return turn.Message{UUID: uuid, Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}}
	}
	answer := func(uuid string) *turn.Message {
		return &turn.Message{UUID: uuid, Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: "done"}}}
	}
	event := func(seq int64, model string, in turn.Message, usage turn.Usage) turn.Event {
		return turn.Event{
			Schema: turn.SchemaV1_1, EventID: fmt.Sprintf("ev-predict-%d", seq), TenantID: tenant, SessionID: id, Seq: seq,
			Model: model, InputMessages: []turn.Message{in}, Response: answer(fmt.Sprintf("a%d", seq)), Usage: &usage,
			OccurredAt: time.Date(2026, 11, 25, 10, 0, int(seq), 0, time.UTC),
		}
	}
	apply := func(ev turn.Event) {
		t.Helper()
		h.publish(t, ev, ev.EventID)
		h.waitApplied(t, map[string]int64{id: ev.Seq})
	}

	// 1: system and tools whole; the response's input side is 1.2 times
	// the prefix and message estimates beyond the prefix.
	m1 := user("u1", strings.Repeat("please look at the build ", 400))
	est1 := tokens.EstimateMessage(m1)
	growth1 := est1 * 6 / 5
	ev := event(1, "claude-sonnet-4-5", m1, turn.Usage{InputTokens: prefix + growth1, OutputTokens: 5})
	ev.RequestPrefix = &turn.RequestPrefix{System: system, Tools: tools, Hash: "p1"}
	apply(ev)
	s, err := h.store.GetSession(ctx, tenant, id)
	require.NoError(t, err)
	require.Equal(t, prefix, s.PrefixTokens)
	require.Equal(t, "p1", s.PrefixHash)
	require.InDelta(t, float64(growth1)/float64(est1), s.EstimateFactor, 1e-9)
	baseline := prefix + growth1 + tokens.ResponseOutput(*ev.Usage, ev.Response.Content)
	require.Equal(t, baseline, s.BaselineTokens)

	// 2: the prefix by hash alone; the client compacted first, so the count
	// starts over from the prefix and the summary.
	summary := user("u2", strings.Repeat("summary of the work so far ", 300))
	ev = event(2, "claude-sonnet-4-5", summary, turn.Usage{InputTokens: prefix + tokens.EstimateMessage(summary), OutputTokens: 5})
	ev.RequestPrefix = &turn.RequestPrefix{Hash: "p1"}
	ev.ClientCompaction = &turn.ClientCompaction{Trigger: "manual", PreTokens: baseline}
	apply(ev)
	s, err = h.store.GetSession(ctx, tenant, id)
	require.NoError(t, err)
	require.Equal(t, prefix, s.PrefixTokens, "the hash named the stored prefix")
	require.Equal(t, ev.Usage.InputSide()+tokens.ResponseOutput(*ev.Usage, ev.Response.Content), s.BaselineTokens)
	require.Less(t, s.BaselineTokens, baseline+tokens.EstimateMessage(summary), "not on top of the history")

	// An unknown hash keeps the stored prefix, and is counted.
	m := user("u2b", "one more thing")
	ev = event(3, "claude-sonnet-4-5", m, turn.Usage{})
	ev.Response, ev.Usage = nil, nil
	ev.RequestPrefix = &turn.RequestPrefix{Hash: "never-sent"}
	apply(ev)
	s, err = h.store.GetSession(ctx, tenant, id)
	require.NoError(t, err)
	require.Equal(t, prefix, s.PrefixTokens)
	require.Equal(t, "p1", s.PrefixHash)
	require.EqualValues(t, 1, h.metrics.SumAll("mnemos.accounting.unknown_prefix"))

	// 4: another model, no usage: the context is counted by its estimate
	// beside the prefix, with no factor. The stored context still holds
	// the messages before the client's compaction: its keep point does
	// not move (only the count starts over).
	m3 := user("u3", "and now?")
	ev = event(4, "claude-opus-4-5", m3, turn.Usage{})
	ev.Response, ev.Usage = nil, nil
	apply(ev)
	s, err = h.store.GetSession(ctx, tenant, id)
	require.NoError(t, err)
	require.False(t, s.HasUsage)
	require.Zero(t, s.EstimateFactor)
	var context int64
	for _, m := range []turn.Message{m1, *answer("a1"), summary, *answer("a2"), m, m3} {
		context += tokens.EstimateMessage(m)
	}
	require.Equal(t, prefix+context, s.TokenCount)
}

// TestTenantPrior: a new session starts from the factors the tenant's
// sessions learnt.
func TestTenantPrior(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	prose, dense, err := h.store.EstimatePrior(ctx, tenant)
	require.NoError(t, err)
	require.Zero(t, prose)
	require.Zero(t, dense)

	text := strings.Repeat("please look at the build and tell me what broke ", 100)
	msg := turn.Message{UUID: "u1", Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}}
	est := tokens.EstimateMessage(msg)
	first := func(id string, input int64) turn.Event {
		return turn.Event{
			Schema: turn.SchemaV1_1, EventID: "ev-" + id, TenantID: tenant, SessionID: id, Seq: 1,
			Model: "claude-sonnet-4-5", InputMessages: []turn.Message{msg},
			Response:      &turn.Message{UUID: "a-" + id, Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: "ok"}}},
			Usage:         &turn.Usage{InputTokens: input, OutputTokens: 1},
			RequestPrefix: &turn.RequestPrefix{Tokens: 5_000},
			OccurredAt:    time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC),
		}
	}
	ev := first("learner", 5_000+est*13/10)
	h.publish(t, ev, ev.EventID)
	h.waitApplied(t, map[string]int64{"learner": 1})
	learnt, err := h.store.GetSession(ctx, tenant, "learner")
	require.NoError(t, err)
	require.InDelta(t, float64(est*13/10)/float64(est), learnt.EstimateFactor, 1e-9)

	prose, _, err = h.store.EstimatePrior(ctx, tenant)
	require.NoError(t, err)
	require.InDelta(t, learnt.EstimateFactor, prose, 1e-9)

	// A second session whose first turn has no usage keeps the prior.
	ev = first("newcomer", 0)
	ev.Response, ev.Usage = nil, nil
	h.publish(t, ev, ev.EventID)
	h.waitApplied(t, map[string]int64{"newcomer": 1})
	s, err := h.store.GetSession(ctx, tenant, "newcomer")
	require.NoError(t, err)
	require.InDelta(t, learnt.EstimateFactor, s.EstimateFactor, 1e-9)
	require.Equal(t, int64(5_000)+int64(math.Ceil(float64(est)*learnt.EstimateFactor-1e-9)), s.TokenCount)
}
