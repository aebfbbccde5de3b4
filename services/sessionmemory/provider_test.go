package sessionmemory_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/services/sessionmemory"
)

// calls records the guarded calls' tasks.
type calls struct {
	mu    sync.Mutex
	tasks []llm.Task
}

func (c *calls) Record(_ context.Context, call llm.Call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tasks = append(c.tasks, call.Task)
	return nil
}

// TestABrokenHeadingIsRejectedAndTheNotesKept runs updates through the
// Anthropic SDK against a local server that answers as scripted: a good
// edit is stored; an answer that renames a heading is rejected and
// counted, and the notes stay as they were; a failing model is counted too.
func TestABrokenHeadingIsRejectedAndTheNotesKept(t *testing.T) {
	t.Parallel()
	tmpl, err := sessionnotes.ParseTemplate(sessionnotes.DefaultTemplate)
	require.NoError(t, err)
	state, _ := tmpl.Section(sessionnotes.HeadingState)
	good := "# " + state.Heading + "\n" + state.Description + "\n\nReading file 1 to check it.\n"
	broken := "# Status\n" + state.Description + "\n\nReading file 2.\n"
	srv := llmtest.NewAnthropicServer(t, llmtest.Sequence(llmtest.Text(good), llmtest.Text(broken), llmtest.ServerError()))
	p, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: srv.URL})
	require.NoError(t, err)
	var rec calls
	provider := llm.Guard(p, llm.GuardOptions{MaxAttempts: 2, Recorder: &rec, Sleep: func(context.Context, time.Duration) error { return nil }})

	h := setup(t)
	h.service(provider)
	c := h.conversation("rej")
	c.round(1, 400)
	h.publish("rej", 3, 10_000, 1, 1)
	n := h.settled("rej", 3)
	require.EqualValues(t, 1, n.Version)
	want := sessionnotes.Apply(tmpl, []sessionnotes.Section{{Heading: state.Heading, Description: state.Description, Body: "Reading file 1 to check it."}}).Render()
	require.Equal(t, want, n.Content)

	c.round(2, 400)
	h.publish("rej", 10, 15_000, 5, 0)
	n = h.settled("rej", 10)
	require.EqualValues(t, 1, n.Version, "the rejected answer wrote nothing")
	require.Equal(t, want, n.Content, "the old notes are kept")
	require.EqualValues(t, 1, n.RejectedUpdates)
	require.Contains(t, n.LastError, `heading "Status" is not one of the notes' headings`)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.session_notes.updates", "outcome", sessionmemory.OutcomeRejected))

	c.round(3, 400)
	h.publish("rej", 11, 20_000, 6, 0)
	n = h.settled("rej", 11)
	require.EqualValues(t, 1, n.Version)
	require.Equal(t, want, n.Content)
	require.EqualValues(t, 1, n.FailedUpdates)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.session_notes.updates", "outcome", sessionmemory.OutcomeFailed))
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.session_notes.updates", "outcome", sessionmemory.OutcomeUpdated))

	reqs := srv.Requests()
	require.Len(t, reqs, 4, "one call each, the failing one retried once by the guard")
	first := reqs[0]
	require.True(t, first.CachedSystem, "the fixed system prompt is marked for the prompt cache")
	lastMsg := first.Messages[len(first.Messages)-1].Text
	require.Contains(t, lastMsg, "<current-notes>\n# Session Title")
	require.Contains(t, lastMsg, "under about 2000 tokens")
	var all strings.Builder
	for _, m := range first.Messages {
		all.WriteString(m.Text)
	}
	require.Contains(t, all.String(), "Request 1: read file 1.")
	require.NotContains(t, reqs[1].Messages[0].Text, "Request 1: read file 1.", "the next update reads only the messages after the last summarized one")
	require.Contains(t, reqs[1].Messages[len(reqs[1].Messages)-1].Text, "Reading file 1 to check it.", "and the current notes")
	require.Equal(t, []llm.Task{llm.TaskNotes, llm.TaskNotes, llm.TaskNotes}, rec.tasks, "usage is recorded under the notes task")
}
