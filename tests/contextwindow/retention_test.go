package contextwindow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/retention"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
)

// retrySession is three rounds with what must survive in every category
// but todos: three instructions (the last one the latest request), a file
// the user names and the agent reads, a failing test in a shell command's
// output (with 20,000 bytes more, so a compaction saves), and an
// identifier in backticks.
func retrySession(t *testing.T, h *harness, id string) {
	t.Helper()
	c := h.conversation(id)
	c.user("Fix the flaky test in `TestRetryBackoff`. Never change the public API of pkg/retry/retry.go.")
	c.respond(t, time.Minute, text("Reading it."), toolUse(id+"-read", "Read", map[string]any{"file_path": "/repo/pkg/retry/retry.go"}))
	c.toolResult(id+"-read", "package retry\n\nfunc Backoff(n int) time.Duration { return time.Second << n }\n")
	c.respond(t, time.Minute, text("Running the test."), toolUse(id+"-test", "Bash", map[string]any{"command": "go test -v ./pkg/retry"}))
	c.toolResult(id+"-test", filler("=== RUN   TestRetryBackoff", 20_000)+"\n--- FAIL: TestRetryBackoff (0.01s)\n    retry_test.go:40: got 3 attempts, want 4\nFAIL\n")
	c.respond(t, time.Minute, text("The backoff doubles one step too early."))
	c.user("Use a table-driven test instead.")
	c.respond(t, time.Minute, text("Rewriting it as a table."))
}

// poorSummary keeps the first instruction and the file of retrySession,
// and none of the rest.
const poorSummary = "<summary>\n## 1. Primary Request and Intent\nFix the flaky test in `TestRetryBackoff`.\n" +
	"## 3. Files and Code Sections\n- pkg/retry/retry.go\n## 9. Optional Next Step\nRewrite the test.\n</summary>"

// poorDetail is what poorSummary keeps: mean(1/3, 0, 1, 0, 1) = 7/15.
var poorDetail = map[string]retention.Tally{
	retention.Instructions: {Found: 1, Total: 3}, retention.LastRequest: {Found: 0, Total: 1},
	retention.Files: {Found: 1, Total: 1}, retention.Errors: {Found: 0, Total: 1},
	retention.Todos: {Found: 0, Total: 0}, retention.Identifiers: {Found: 1, Total: 1},
}

type retentionBody struct {
	ID              string                     `json:"id"`
	Status          string                     `json:"status"`
	Method          string                     `json:"method"`
	Error           string                     `json:"error"`
	Retention       *float64                   `json:"retention"`
	RetentionDetail map[string]retention.Tally `json:"retention_detail"`
}

// compactNow asks for a manual compaction of a session, waits for it and
// returns it as GET /v1/compactions/{id} serves it.
func compactNow(t *testing.T, h *harness, session string) retentionBody {
	t.Helper()
	var done compactAnswer
	status, raw := h.call(t, http.MethodPost, "/v1/sessions/"+session+"/compact", `{}`, &done)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "completed", done.Status, done.Error)
	var got retentionBody
	status, raw = h.get(t, "/v1/compactions/"+done.ID, &got)
	require.Equal(t, 200, status, string(raw))
	return got
}

// listed is a session's compactions as GET …/compactions serves them.
func listed(t *testing.T, h *harness, session string) []retentionBody {
	t.Helper()
	var list struct {
		Compactions []retentionBody `json:"compactions"`
	}
	status, raw := h.get(t, "/v1/sessions/"+session+"/compactions", &list)
	require.Equal(t, 200, status, string(raw))
	return list.Compactions
}

// TestRetentionIsStoredAndServed: every completed compaction carries its
// retention score and per-category tallies, in the compaction's row and in
// the session's list, and the histogram has it by method. With no floor
// set, a model summary that keeps little is still used.
func TestRetentionIsStoredAndServed(t *testing.T) {
	t.Parallel()
	provider, srv := scripted(t, func(llmtest.Request) llmtest.Reply { return llmtest.Text(poorSummary) })
	h := setup(t, provider)
	retrySession(t, h, "retry")

	got := compactNow(t, h, "retry")
	require.Equal(t, 1, srv.Calls())
	require.Equal(t, events.MethodFull, got.Method, "no floor: the model's summary is used")
	require.Empty(t, got.Error)
	require.NotNil(t, got.Retention)
	require.InDelta(t, 7.0/15, *got.Retention, 1e-9)
	require.Equal(t, poorDetail, got.RetentionDetail)

	list := listed(t, h, "retry")
	require.Len(t, list, 1)
	require.Equal(t, got.Retention, list[0].Retention)
	require.Equal(t, got.RetentionDetail, list[0].RetentionDetail)

	n, sum := h.metrics.Histogram("mnemos.compactions.retention", "method", events.MethodFull)
	require.Equal(t, uint64(1), n)
	require.InDelta(t, 7.0/15, sum, 1e-9)
	require.Zero(t, h.metrics.Sum("mnemos.compactions.low_retention", "", ""))

	// A session-memory compaction is scored too: the notes say nothing of
	// the 20 files they cover, the latest request among them or the
	// errors, and only the restored files are found.
	lastCovered, _ := notesSession(t, h, "notes")
	h.writeNotes(t, "notes", notesDoc(t, map[string]string{sessionnotes.HeadingState: "Files 1 to 20 were read and are fine."}), lastCovered)
	notes := compactNow(t, h, "notes")
	require.Equal(t, events.MethodSessionMemory, notes.Method)
	require.Equal(t, map[string]retention.Tally{
		retention.Instructions: {}, retention.LastRequest: {Found: 0, Total: 1}, retention.Files: {Found: 5, Total: 20},
		retention.Errors: {}, retention.Todos: {}, retention.Identifiers: {},
	}, notes.RetentionDetail, "the five latest files not kept are restored")
	require.InDelta(t, (0+5.0/20)/2, *notes.Retention, 1e-9)
	n, _ = h.metrics.Histogram("mnemos.compactions.retention", "method", events.MethodSessionMemory)
	require.Equal(t, uint64(1), n)
}

var (
	requestRe = regexp.MustCompile(`Request \d+: read file \d+\.`)
	srcFileRe = regexp.MustCompile(`/src/f\d+\.go`)
)

// faithful writes a summary that quotes the latest "Request N" line and
// lists every /src file of the conversation it is given.
func faithful(req llmtest.Request) llmtest.Reply {
	var all strings.Builder
	for _, m := range req.Messages {
		all.WriteString(m.Text + "\n")
	}
	reqs := requestRe.FindAllString(all.String(), -1)
	seen := map[string]bool{}
	var files []string
	for _, f := range srcFileRe.FindAllString(all.String(), -1) {
		if !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	return llmtest.Text(fmt.Sprintf("<summary>\n## 3. Files and Code Sections\n- %s\n## 9. Optional Next Step\n> %s\n</summary>",
		strings.Join(files, "\n- "), reqs[len(reqs)-1]))
}

// TestMinRetentionMovesTheFunnelOn: with compaction.min_retention set, a
// model summary that keeps less is not used and the extractive summary
// (which keeps more) is; session notes that keep less give way to the
// model; each compaction says why, and the metric counts it.
func TestMinRetentionMovesTheFunnelOn(t *testing.T) {
	t.Parallel()
	provider, srv := scripted(t, func(req llmtest.Request) llmtest.Reply {
		for _, m := range req.Messages {
			if strings.Contains(m.Text, "TestRetryBackoff") {
				return llmtest.Text(poorSummary)
			}
		}
		return faithful(req)
	})
	h := setup(t, provider)
	require.NoError(t, h.store.SetTenantSettings(context.Background(), tenant, []byte(`{"compaction": {"min_retention": 0.6}}`)))
	require.Eventually(t, func() bool {
		set, err := h.settings.For(context.Background(), tenant)
		return err == nil && set.Compaction.MinRetention == 0.6
	}, 10*time.Second, 50*time.Millisecond, "the settings cache took the change")

	// The model's summary keeps 7/15: under the floor.
	retrySession(t, h, "retry")
	got := compactNow(t, h, "retry")
	require.Equal(t, 1, srv.Calls(), "the model answered")
	require.Equal(t, events.MethodExtractive, got.Method, "the next step of the funnel")
	require.Equal(t, "the model summary was not used: its retention is 0.467 (instructions 1/3, last_request 0/1, errors 0/1), under compaction.min_retention 0.6", got.Error)
	require.Equal(t, map[string]retention.Tally{
		retention.Instructions: {Found: 3, Total: 3}, retention.LastRequest: {Found: 1, Total: 1},
		retention.Files: {Found: 1, Total: 1}, retention.Errors: {Found: 0, Total: 1},
		retention.Todos: {}, retention.Identifiers: {Found: 1, Total: 1},
	}, got.RetentionDetail, "the extractive summary keeps every user message; a shell command's output it does not")
	require.InDelta(t, 0.8, *got.Retention, 1e-9)
	require.Equal(t, int64(1), h.metrics.Sum("mnemos.compactions.low_retention", "method", events.MethodFull))
	require.Zero(t, h.metrics.Sum("mnemos.compactions.no_progress", "", ""), "it made progress")

	// The notes keep 1/8: under the floor; the model's summary keeps all.
	lastCovered, _ := notesSession(t, h, "notes")
	h.writeNotes(t, "notes", notesDoc(t, map[string]string{sessionnotes.HeadingState: "Files 1 to 20 were read and are fine."}), lastCovered)
	notes := compactNow(t, h, "notes")
	require.Equal(t, 2, srv.Calls(), "the model was asked")
	require.Equal(t, events.MethodFull, notes.Method)
	require.Equal(t, "the session notes were not used: its retention is 0.125 (last_request 0/1, files 5/20), under compaction.min_retention 0.6", notes.Error)
	require.Equal(t, 1.0, *notes.Retention)
	require.Equal(t, map[string]retention.Tally{
		retention.Instructions: {}, retention.LastRequest: {Found: 1, Total: 1}, retention.Files: {Found: 30, Total: 30},
		retention.Errors: {}, retention.Todos: {}, retention.Identifiers: {},
	}, notes.RetentionDetail)
	require.Equal(t, int64(1), h.metrics.Sum("mnemos.compactions.low_retention", "method", events.MethodSessionMemory))

	// Both are in the sessions' lists as served.
	for session, want := range map[string]retentionBody{"retry": got, "notes": notes} {
		list := listed(t, h, session)
		require.Len(t, list, 1)
		b, _ := json.Marshal(list[0])
		w, _ := json.Marshal(want)
		require.JSONEq(t, string(w), string(b), session)
	}
}

// TestPartialCompactionsAreScoredOnWhatTheyReplace: an "up_to" compaction
// is scored on the messages up to the pivot, a "from" one on those after it.
func TestPartialCompactionsAreScoredOnWhatTheyReplace(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	for _, tc := range []struct {
		direction string
		pivot     int // the pivot is this request's message (0-based)
		detail    map[string]retention.Tally
	}{
		// Requests 1 to 8; the files of rounds 1 to 7 (round 8's Read comes after its request).
		{events.DirectionUpTo, 7, map[string]retention.Tally{retention.LastRequest: {Found: 1, Total: 1}, retention.Files: {Found: 7, Total: 7}}},
		// Requests 5 to 12, the files of rounds 4 to 12.
		{events.DirectionFrom, 3, map[string]retention.Tally{retention.LastRequest: {Found: 1, Total: 1}, retention.Files: {Found: 9, Total: 9}}},
	} {
		session := "partial-" + tc.direction
		users := manualSession(t, h, session)
		var done compactAnswer
		status, raw := h.call(t, http.MethodPost, "/v1/sessions/"+session+"/compact", fmt.Sprintf(`{"pivot_uuid":%q,"direction":%q}`, users[tc.pivot], tc.direction), &done)
		require.Equal(t, 200, status, string(raw))
		require.Equal(t, "completed", done.Status, done.Error)
		var got retentionBody
		h.get(t, "/v1/compactions/"+done.ID, &got)
		want := map[string]retention.Tally{}
		for _, c := range retention.Categories() {
			want[c] = tc.detail[c]
		}
		require.Equal(t, want, got.RetentionDetail, tc.direction)
		require.Equal(t, 1.0, *got.Retention, tc.direction)
	}
}
