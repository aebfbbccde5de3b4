package contextwindow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// manualSession makes a session of 12 rounds (far below the threshold)
// and returns the uuids of its user messages.
func manualSession(t *testing.T, h *harness, id string) []string {
	t.Helper()
	c := h.conversation(id)
	var users []string
	for round := 1; round <= 12; round++ {
		users = append(users, c.user(fmt.Sprintf("Request %d: check file %d.", round, round)))
		call := fmt.Sprintf("%s-call-%d", id, round)
		c.respond(t, time.Minute, text("Checking."), toolUse(call, "Read", map[string]any{"file_path": fmt.Sprintf("/src/f%d.go", round)}))
		c.toolResult(call, filler(fmt.Sprintf("f%d", round), 2_000))
		c.respond(t, time.Minute, text(fmt.Sprintf("File %d is fine.", round)))
	}
	return users
}

type compactAnswer struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Trigger    string `json:"trigger"`
	Method     string `json:"method"`
	Direction  string `json:"direction"`
	Summary    string `json:"summary"`
	Error      string `json:"error"`
	PreTokens  int64  `json:"pre_tokens"`
	PostTokens int64  `json:"post_tokens"`
}

func TestManualCompactionWaitsForItsResult(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	manualSession(t, h, "manual")
	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/manual/compact", `{"instructions":"Keep the file names."}`, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "completed", got.Status)
	require.Equal(t, "manual", got.Trigger)
	require.Equal(t, "full", got.Method)
	require.Contains(t, got.Summary, "Request 12: check file 12.")

	var ctx contextBody
	h.get(t, "/v1/sessions/manual/context", &ctx)
	require.Equal(t, got.ID, ctx.Compaction.ID)
	require.Len(t, ctx.Messages, 1, "a full compaction keeps no message")
	require.False(t, h.session(t, "manual").CompactionInFlight)

	// Without waiting, the answer is the job, to be polled.
	status, raw = h.call(t, "POST", "/v1/sessions/manual/compact", `{"wait":false}`, &got)
	require.Equal(t, 202, status, string(raw))
	require.Eventually(t, func() bool {
		h.get(t, "/v1/compactions/"+got.ID, &got)
		return got.Status == "completed"
	}, 30*time.Second, 20*time.Millisecond)
}

func TestPartialCompactionUpToKeepsWhatFollows(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	users := manualSession(t, h, "upto")
	var before contextBody
	h.get(t, "/v1/sessions/upto/context", &before)
	pivot := users[7] // request 8

	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/upto/compact", fmt.Sprintf(`{"pivot_uuid":%q,"direction":"up_to"}`, pivot), &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "completed", got.Status, got.Error)
	require.Contains(t, got.Summary, "Request 8: check file 8.")
	require.NotContains(t, got.Summary, "Request 9: check file 9.")

	var after contextBody
	h.get(t, "/v1/sessions/upto/context", &after)
	require.True(t, strings.HasPrefix(after.Messages[0].Content[0].Text, "<mnemos:compact-boundary"))
	// Everything after the pivot is kept as it was.
	i := indexOf(before.MessageUUIDs, pivot)
	require.Equal(t, before.MessageUUIDs[i+1:], after.MessageUUIDs[1:])
	require.Equal(t, wireOf(t, before)[i+1:], wireOf(t, after)[1:])
}

func TestPartialCompactionFromKeepsTheCachedPrefix(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	users := manualSession(t, h, "from")
	var before contextBody
	h.get(t, "/v1/sessions/from/context", &before)
	pivot := users[3] // request 4

	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/from/compact", fmt.Sprintf(`{"pivot_uuid":%q,"direction":"from"}`, pivot), &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "completed", got.Status, got.Error)
	require.NotContains(t, got.Summary, "Request 4: check file 4.")
	require.Contains(t, got.Summary, "Request 12: check file 12.")

	var after contextBody
	h.get(t, "/v1/sessions/from/context", &after)
	i := indexOf(before.MessageUUIDs, pivot)
	require.Equal(t, wireOf(t, before)[:i+1], wireOf(t, after)[:i+1], "the prefix up to the pivot is byte for byte what it was")
	require.Len(t, after.Messages, i+2, "then one message: boundary and summary")
	require.True(t, strings.HasPrefix(after.Messages[i+1].Content[0].Text, "<mnemos:compact-boundary"))
}

func TestManualCompactionRefusesBadRequests(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	manualSession(t, h, "bad")
	for _, tc := range []struct {
		body   string
		status int
	}{
		{`{"direction":"sideways","pivot_uuid":"x"}`, 400},
		{`{"direction":"from"}`, 400},
		{`{"pivot_uuid":"x"}`, 400},
		{`{"timeout_seconds":9999}`, 400},
		{`{"unknown":1}`, 400},
		{`not json`, 400},
		{`{"instructions":"keep the \u0000 out"}`, 400},
	} {
		status, raw := h.call(t, "POST", "/v1/sessions/bad/compact", tc.body, nil)
		require.Equal(t, tc.status, status, "%s: %s", tc.body, raw)
	}
	status, _ := h.call(t, "POST", "/v1/sessions/nosuch/compact", `{}`, nil)
	require.Equal(t, 404, status)

	// A pivot that is not in the context fails the compaction, with the reason.
	var got compactAnswer
	status, raw := h.call(t, "POST", "/v1/sessions/bad/compact", `{"pivot_uuid":"nope","direction":"up_to"}`, &got)
	require.Equal(t, 200, status, string(raw))
	require.Equal(t, "failed", got.Status)
	require.Contains(t, got.Error, `pivot message "nope" is not in the session's context`)
	require.False(t, h.session(t, "bad").CompactionInFlight)
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// wireOf re-encodes each message of a context, to compare them as bytes.
func wireOf(t *testing.T, c contextBody) []string {
	t.Helper()
	out := make([]string, len(c.Messages))
	for i, m := range c.Messages {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		out[i] = string(b)
	}
	return out
}

// TestPinnedTextsSurviveEveryCompaction: texts the tenant and the session
// pin are carried word for word after every compaction, outside the
// summary, and count in the context.
func TestPinnedTextsSurviveEveryCompaction(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	require.NoError(t, h.store.SetTenantSettings(context.Background(), tenant,
		[]byte(`{"compaction": {"pinned": ["Never push to main without a review."]}}`)))
	c := h.conversation("pinned")
	c.user("Hello.")
	c.respond(t, time.Minute, text("Hi."))

	pin := "Deploys go through `make release`, never by hand.\nAsk before deleting a branch."
	var pins struct {
		Pins         []string `json:"pins"`
		TenantPinned []string `json:"tenant_pinned"`
	}
	body, err := json.Marshal(map[string]any{"pins": []string{pin}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		status, raw := h.call(t, http.MethodPut, "/v1/sessions/pinned/pins", string(body), &pins)
		require.Equal(t, 200, status, string(raw))
		return len(pins.TenantPinned) == 1
	}, 10*time.Second, 50*time.Millisecond, "the tenant's settings were read")
	require.Equal(t, []string{pin}, pins.Pins)

	for i := 1; i <= 2; i++ {
		grow(t, h, c, func(int) bool {
			return h.session(t, c.id).CompactRequests == int64(i) && !h.session(t, c.id).CompactionInFlight
		})
		got := h.context(t, c.id)
		require.NotNil(t, got.body.Compaction, "compaction %d", i)
		head := got.body.Messages[0].Content
		var pinned string
		for _, b := range head {
			if strings.Contains(b.Text, "<pinned>") {
				pinned = b.Text
			}
		}
		require.Contains(t, pinned, "<pinned>\nNever push to main without a review.\n</pinned>", "compaction %d: the tenant's pin", i)
		require.Contains(t, pinned, "<pinned>\n"+pin+"\n</pinned>", "compaction %d: the session's, word for word", i)
		require.NotContains(t, head[1].Text, "make release", "outside the summary")
	}

	status, raw := h.call(t, http.MethodPut, "/v1/sessions/pinned/pins", `{"pins": [""]}`, nil)
	require.Equal(t, http.StatusBadRequest, status, string(raw))
	require.Contains(t, string(raw), "bad_pins")
	status, raw = h.call(t, http.MethodGet, "/v1/sessions/nope/pins", "", nil)
	require.Equal(t, http.StatusNotFound, status, string(raw))
}
