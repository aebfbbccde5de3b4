package contextwindow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// putMemory saves a memory through the API.
func (h *harness) putMemory(t *testing.T, scope, name, typ, description, body string) {
	t.Helper()
	md := fmt.Sprintf("---\nname: %s\ndescription: %s\ntype: %s\n---\n\n%s\n", name, description, typ, body)
	status, raw := h.call(t, "PUT", "/v1/scopes/"+scope+"/memories/"+name, md, nil)
	require.Equal(t, 201, status, string(raw))
}

// rawContext is GET …/context as bytes, and its messages.
type rawContext struct {
	raw      []byte
	messages json.RawMessage
	body     contextBody
}

func (h *harness) context(t *testing.T, id string) rawContext {
	t.Helper()
	status, raw := h.get(t, "/v1/sessions/"+id+"/context", nil)
	require.Equal(t, 200, status, string(raw))
	var out rawContext
	out.raw = raw
	var parts struct {
		Messages json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(raw, &parts))
	require.NoError(t, json.Unmarshal(raw, &out.body))
	out.messages = parts.Messages
	return out
}

// of returns the content of the message with uuid.
func (c rawContext) of(t *testing.T, uuid string) turn.Content {
	t.Helper()
	for i, u := range c.body.MessageUUIDs {
		if u == uuid {
			return c.body.Messages[i].Content
		}
	}
	t.Fatalf("no message %s in the context", uuid)
	return nil
}

// appends checks that next starts with prev's messages (an append, no cache break).
func appends(t *testing.T, prev, next rawContext) {
	t.Helper()
	require.Equal(t, prev.body.Epoch, next.body.Epoch, "no break was recorded")
	open := prev.messages[:len(prev.messages)-1]
	require.True(t, bytes.HasPrefix(next.messages, open), "the context only appended")
}

type recallAnswer struct {
	Outcome  string `json:"outcome"`
	Memories []struct {
		Scope string `json:"scope"`
		Name  string `json:"name"`
		Type  string `json:"type"`
		Age   string `json:"age"`
		Text  string `json:"text"`
	} `json:"memories"`
	Candidates   int            `json:"candidates"`
	Dropped      map[string]int `json:"dropped"`
	SessionBytes int64          `json:"session_bytes"`
	SessionLimit int64          `json:"session_limit"`
	LLMProvider  string         `json:"llm_provider"`
}

// TestPrefetchedMemoriesAppearBesideTheLatestUserMessage goes through the
// real ingest: the accountant applies a round whose user asks about
// staging, the relay publishes turn.accounted, the prefetch consumer on the
// bus recalls the staging memory, and the context shows it beside that
// user message — after the first read too, since the read waits for the
// prefetch. Later rounds only append: no unexpected cache break.
func TestPrefetchedMemoriesAppearBesideTheLatestUserMessage(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	h.putMemory(t, "project:repo-x", "staging-db-read-only-fridays", "feedback", "The staging database is read-only on Fridays",
		"Migrations on staging wait until Monday.\n\n**Why:** the replica sync runs on Fridays.\n**How to apply:** schedule it for Monday.")
	h.putMemory(t, "project:repo-x", "deploy-window", "project", "Deploys go out on Tuesdays after the standup", "Tuesdays, 11:00.")
	c := h.conversation("s-recall")
	c.scope = map[string]string{"project": "repo-x"}
	u1 := c.user("Can you run the migration on the staging database?")
	c.respond(t, time.Minute, text("Let me run it."), toolUse("call-1", "Bash", map[string]any{"command": "make migrate"}))

	first := h.context(t, "s-recall")
	content := first.of(t, u1)
	require.Len(t, content, 2, "the user's text, then the reminder beside it")
	require.Equal(t, "Can you run the migration on the staging database?", content[0].Text)
	require.True(t, strings.HasPrefix(content[1].Text, "<system-reminder>\nA saved memory that may help here: project:repo-x/staging-db-read-only-fridays.md (feedback, saved today).\n"), content[1].Text)
	require.Contains(t, content[1].Text, "Migrations on staging wait until Monday.")
	require.NotContains(t, string(first.messages), "deploy-window")
	again := h.context(t, "s-recall")
	require.Equal(t, string(first.raw), string(again.raw), "two reads, the same bytes")
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.recall.requests", "outcome", "surfaced") == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.recall.selected", "source", "prefetch"))

	// The tool round and the next request only append.
	c.toolResult("call-1", "migrated 3 tables")
	c.respond(t, time.Minute, text("Done: 3 tables migrated."))
	second := h.context(t, "s-recall")
	appends(t, first, second)
	u2 := c.user("Thanks, that is all for today.")
	c.respond(t, time.Minute, text("Bye."))
	third := h.context(t, "s-recall")
	appends(t, second, third)
	require.Len(t, third.of(t, u2), 1, "nothing bears on it: nothing beside it")
	require.Len(t, third.of(t, u1), 2, "the reminder stays where it was shown")
	require.Zero(t, h.metrics.Sum("mnemos.context.cache_breaks", "kind", "unexpected"))

	// Through the API: the session was shown the staging memory already.
	var got recallAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/s-recall/recall", `{"query": "can you run the migration on the staging database?", "recent_tools": ["Bash"]}`, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "none", got.Outcome)
	require.Equal(t, 1, got.Candidates, "only deploy-window is left to offer")
	require.Empty(t, got.Memories)
	require.Equal(t, len(content[1].Text), int(got.SessionBytes))
	require.EqualValues(t, 60<<10, got.SessionLimit)
	require.Equal(t, "builtin", got.LLMProvider)
}

// TestALatePrefetchIsNotShown: when the selector is slower than the
// tenant's prefetch wait, the context shows the user message without
// memories; the prefetch that ends later is late, changes nothing in the
// context, and surfaces nothing, so the memory is shown beside a later
// message instead.
func TestALatePrefetchIsNotShown(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	require.NoError(t, h.store.SetTenantSettings(context.Background(), tenant, []byte(`{"recall": {"prefetch_wait_ms": 200}}`)))
	release := make(chan struct{})
	slow := builtin.Handler(func(ctx context.Context, req llm.Request) (llm.Response, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
		return recall.Builtin(ctx, req)
	})
	h.selector.Store(&slow)
	h.putMemory(t, "project:repo-x", "staging-db-read-only-fridays", "feedback", "The staging database is read-only on Fridays", "Wait for Monday.")
	c := h.conversation("s-late")
	c.scope = map[string]string{"project": "repo-x"}
	u1 := c.user("Can you run the migration on the staging database?")
	c.respond(t, time.Minute, text("Which tables?"))

	first := h.context(t, "s-late")
	require.Len(t, first.of(t, u1), 1, "the prefetch did not come in time")
	close(release)
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.recall.requests", "outcome", "late") == 1
	}, 10*time.Second, 10*time.Millisecond)
	again := h.context(t, "s-late")
	require.Equal(t, string(first.raw), string(again.raw), "a late prefetch changes nothing")

	// The next message's prefetch has all the time it needs: on a busy
	// machine, 200 ms from the message can pass before the context is read.
	require.NoError(t, h.store.SetTenantSettings(context.Background(), tenant, []byte(`{"recall": {"prefetch_wait_ms": 60000}}`)))
	require.Eventually(t, func() bool {
		set, err := h.settings.For(context.Background(), tenant)
		return err == nil && set.Recall.PrefetchWait() == time.Minute
	}, 10*time.Second, 10*time.Millisecond, "the gateway reads the new wait")
	u2 := c.user("All of them, on the staging database.")
	c.respond(t, time.Minute, text("On it."))
	second := h.context(t, "s-late")
	appends(t, first, second)
	content := second.of(t, u2)
	require.Len(t, content, 2, "what the late prefetch picked was never surfaced, so it is now")
	require.Contains(t, content[1].Text, "staging-db-read-only-fridays.md")
	require.Zero(t, h.metrics.Sum("mnemos.context.cache_breaks", "kind", "unexpected"))
}

// TestTheRecallBudgetIsResetByACompaction: through the API, memories of
// about 4 KB are surfaced until the session has been shown 60 KB; then
// recall stops (capped) until a compaction, after which it surfaces again,
// the memories shown before it included: their reminders left the context
// with the messages the compaction replaced.
func TestTheRecallBudgetIsResetByACompaction(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	firstFive := builtin.Handler(func(_ context.Context, req llm.Request) (llm.Response, error) {
		var refs []string
		for _, line := range strings.Split(req.Messages[0].Content[0].Text, "\n") {
			if ref, _, ok := strings.Cut(strings.TrimPrefix(line, "- "), " ["); ok && strings.HasPrefix(line, "- ") && len(refs) < 5 {
				refs = append(refs, fmt.Sprintf("%q", ref))
			}
		}
		return llm.Response{Text: `{"memories": [` + strings.Join(refs, ",") + `]}`}, nil
	})
	h.selector.Store(&firstFive)
	body := strings.TrimSpace(strings.Repeat("The payments cluster runbook goes on. ", 120))
	for i := range 24 {
		h.putMemory(t, "project:pay", fmt.Sprintf("runbook-%02d", i), "reference", fmt.Sprintf("Payments runbook part %d", i), body)
	}
	manualSession(t, h, "budget")
	ask := `{"query": "how do I restart the payments cluster?", "memory_scope": {"project": "pay"}}`
	var got recallAnswer
	var shown int
	before := map[string]bool{}
	for i := 0; got.Outcome != "capped"; i++ {
		require.Less(t, i, 10)
		status, raw := h.call(t, "POST", "/v1/sessions/budget/recall", ask, &got)
		require.Equal(t, 200, status, string(raw))
		shown += len(got.Memories)
		for _, m := range got.Memories {
			require.False(t, before[m.Name], "%s shown twice before the compaction", m.Name)
			before[m.Name] = true
		}
		if got.Outcome == "surfaced" {
			require.Less(t, got.SessionBytes-int64(len(got.Memories[len(got.Memories)-1].Text)), int64(60<<10),
				"only the last memory shown may cross 60 KB")
		}
	}
	require.GreaterOrEqual(t, got.SessionBytes, int64(60<<10))
	require.Less(t, shown, 24, "recall stopped before every memory was shown")
	status, raw := h.call(t, "POST", "/v1/sessions/budget/recall", ask, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "capped", got.Outcome)

	var compacted compactAnswer
	status, raw = h.call(t, "POST", "/v1/sessions/budget/compact", `{}`, &compacted)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "completed", compacted.Status)
	status, raw = h.call(t, "POST", "/v1/sessions/budget/recall", ask, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "surfaced", got.Outcome, "the compaction reset the budget")
	require.Len(t, got.Memories, 5)
	for _, m := range got.Memories {
		require.True(t, before[m.Name], "%s: the selector picks the most recent memories, the ones shown first", m.Name)
	}
	var fresh int64
	for _, m := range got.Memories {
		fresh += int64(len(m.Text))
	}
	require.Equal(t, fresh, got.SessionBytes, "the budget counts from the compaction on")
}
