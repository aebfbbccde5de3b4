package dreamer_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/services/dreamer"
)

// TestDeletingTooMuchEndsAsAProposal: a run (the real Anthropic SDK against
// a scripted server) that deletes 3 of 10 memories — more than the 20%
// allowed — ends as a proposal: nothing is deleted, the consolidation time
// moves (the work waits for a person, not for the next scan). Approving it
// through the API applies the deletions, each a revision by the dreamer;
// rolling one back restores it. An operator's request skips the time and
// session gates but not the lease.
func TestDeletingTooMuchEndsAsAProposal(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	ctx := context.Background()
	for i := range 10 {
		h.seed(fmt.Sprintf("m-%d", i), fmt.Sprintf("memory number %d", i), fmt.Sprintf("body %d", i))
	}
	provider, srv := scripted(t, llmtest.Sequence(
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			toolCall(memtools.ToolDelete, map[string]string{"name": "m-1", "reason": "obsolete"}),
			toolCall(memtools.ToolDelete, map[string]string{"name": "m-2", "reason": "obsolete"}),
			toolCall(memtools.ToolDelete, map[string]string{"name": "m-3.md", "reason": "merged into m-4.md"}),
		}},
		llmtest.Text("Deleted three stale memories."),
	))
	log := h.watch()
	h.service(fast("guard"), provider, dreamer.Options{})

	// The scope was consolidated an hour ago and has no sessions: only an operator can start one now.
	h.consolidatedAt(time.Now().Add(-time.Hour))
	var body api.Dream
	require.Equal(t, http.StatusAccepted, h.call(http.MethodPost, "/v1/scopes/user:u-42/dream", &body))
	require.Equal(t, "manual", body.Trigger)
	d := h.dream(body.ID, "proposed")
	require.Equal(t, 10, d.MemoriesLive)
	require.Equal(t, 2, d.ChangesAllowed)
	require.Equal(t, 3, d.ChangesDestructive)
	require.Equal(t, []string{"m-1", "m-2", "m-3"}, d.Deleted)
	require.Contains(t, d.Error, "more than the 2 allowed")
	live, err := h.memories.List(ctx, tenant, scope, memory.ListOptions{})
	require.NoError(t, err)
	require.Len(t, live, 10, "nothing was deleted")
	for _, m := range live {
		require.EqualValues(t, 1, m.Revision, m.Name)
	}
	s := h.scopeState()
	require.WithinDuration(t, time.Now(), s.LastConsolidatedAt, time.Minute)
	require.Empty(t, s.LeaseHolder)
	evs := log.of(t, body.ID, "proposed")
	require.Equal(t, []string{"requested", "starting", "updating", "proposed"}, states(evs))
	require.Equal(t, []string{"m-1", "m-2", "m-3"}, evs[3].Deleted)
	require.Equal(t, 3, evs[3].Destructive)
	require.Eventually(t, func() bool { return h.metrics.Sum("mnemos.dreams", "outcome", "proposed") == 1 }, 10*time.Second, 10*time.Millisecond, "proposed counted %d times, dreams %d", h.metrics.Sum("mnemos.dreams", "outcome", "proposed"), h.metrics.Sum("mnemos.dreams", "", ""))
	require.Len(t, srv.Requests(), 2)
	first := srv.Requests()[0]
	require.Contains(t, lastUserText(first), "this run may delete or rewrite at most 2 of them without approval")
	require.Contains(t, first.Tools, dreamer.ToolSearch)

	var got api.Dream
	require.Equal(t, http.StatusOK, h.call(http.MethodGet, "/v1/dreams/"+body.ID, &got))
	require.Equal(t, "proposed", got.Status)
	require.NotNil(t, got.Proposal)
	require.Len(t, got.Proposal.Edits, 3)
	require.Equal(t, "merged into m-4.md", got.Proposal.Edits[2].Reason)
	var conflict api.ErrorBody
	require.Equal(t, http.StatusConflict, h.call(http.MethodPost, "/v1/dreams/"+body.ID+"/kill", &conflict))
	require.Equal(t, "dream_ended", conflict.Error.Code)

	// Approval applies the proposal.
	require.Equal(t, http.StatusOK, h.call(http.MethodPost, "/v1/dreams/"+body.ID+"/approve", &got))
	require.Equal(t, "approved", got.Status)
	require.NotNil(t, got.ApprovedAt)
	live, err = h.memories.List(ctx, tenant, scope, memory.ListOptions{})
	require.NoError(t, err)
	require.Len(t, live, 7)
	revs, err := h.memories.Revisions(ctx, tenant, scope, "m-3")
	require.NoError(t, err)
	require.Len(t, revs, 2)
	require.Equal(t, memory.OpDeleted, revs[1].Op)
	require.Equal(t, memory.ActorDreamer, revs[1].Change.Actor)
	require.Equal(t, "dream "+body.ID+", approved: merged into m-4.md", revs[1].Change.Reason)
	ix, err := h.memories.Index(ctx, tenant, scope)
	require.NoError(t, err)
	require.NotContains(t, ix.Content, "m-3.md")
	evs = log.of(t, body.ID, "completed")
	require.True(t, evs[len(evs)-1].Approved)
	require.Equal(t, http.StatusConflict, h.call(http.MethodPost, "/v1/dreams/"+body.ID+"/approve", &conflict))
	require.Equal(t, "not_a_proposal", conflict.Error.Code)

	// Any memory comes back by rollback.
	res, err := h.memories.Rollback(ctx, tenant, scope, "m-3", 1, memory.Change{Actor: memory.ActorAPI, Reason: "keep it"}, memory.Expect{})
	require.NoError(t, err)
	require.Equal(t, memory.OpRestored, res.Op)
	m, err := h.memories.Get(ctx, tenant, scope, "m-3")
	require.NoError(t, err)
	require.Equal(t, "body 3", m.Body)
	ix, err = h.memories.Index(ctx, tenant, scope)
	require.NoError(t, err)
	require.Contains(t, ix.Content, "m-3.md")
}

// TestASmallScopeMayLoseOneMemoryWithoutApproval: 20% of a scope of 4
// memories is 0.8; the guard allows at least one deletion or rewrite of a
// scope with memories (while max_change_percent is above 0), so a dream
// that deletes one of 4 applies it instead of asking for approval.
func TestASmallScopeMayLoseOneMemoryWithoutApproval(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	ctx := context.Background()
	for i := range 4 {
		h.seed(fmt.Sprintf("m-%d", i), fmt.Sprintf("memory number %d", i), fmt.Sprintf("body %d", i))
	}
	provider, srv := scripted(t, llmtest.Sequence(
		llmtest.Reply{ToolCalls: []llm.ToolCall{toolCall(memtools.ToolDelete, map[string]string{"name": "m-1", "reason": "duplicate of m-2"})}},
		llmtest.Text("Deleted one duplicate."),
	))
	h.service(fast("small"), provider, dreamer.Options{})
	var body api.Dream
	require.Equal(t, http.StatusAccepted, h.call(http.MethodPost, "/v1/scopes/user:u-42/dream", &body))
	d := h.dream(body.ID, "completed")
	require.Equal(t, 4, d.MemoriesLive)
	require.Equal(t, 1, d.ChangesAllowed, "at least one of a small scope")
	require.Equal(t, 1, d.ChangesDestructive)
	require.Equal(t, []string{"m-1"}, d.Deleted)
	live, err := h.memories.List(ctx, tenant, scope, memory.ListOptions{})
	require.NoError(t, err)
	require.Len(t, live, 3, "the deletion was applied")
	require.Contains(t, lastUserText(srv.Requests()[0]), "this run may delete or rewrite at most 1 of them without approval")
}

// TestAStaleProposalIsRefused: a proposal whose memories changed since it
// was made is refused (409 proposal_stale) and applies nothing; a second
// dream of the scope supersedes it.
func TestAStaleProposalIsRefused(t *testing.T) {
	t.Parallel()
	h := setup(t, `{"dreaming": {"max_change_percent": 0}}`)
	ctx := context.Background()
	h.seed("a", "about a", "body a")
	h.seed("b", "about b", "body b")
	provider, _ := scripted(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.Messages) == 1 {
			return llmtest.Reply{ToolCalls: []llm.ToolCall{toolCall(memtools.ToolEdit, map[string]string{"name": "a", "old_string": "body a", "new_string": "body a, corrected"})}}
		}
		return llmtest.Text("Corrected a.")
	})
	h.service(fast("stale"), provider, dreamer.Options{})
	var first api.Dream
	require.Equal(t, http.StatusAccepted, h.call(http.MethodPost, "/v1/scopes/user:u-42/dream", &first))
	d := h.dream(first.ID, "proposed")
	require.Equal(t, []string{"a"}, d.Written, "a rewrite counts against the share as a deletion does")
	require.Equal(t, 1, d.ChangesDestructive)

	h.seed("a", "about a", "body a, changed by someone else")
	var conflict api.ErrorBody
	require.Equal(t, http.StatusConflict, h.call(http.MethodPost, "/v1/dreams/"+first.ID+"/approve", &conflict))
	require.Equal(t, "proposal_stale", conflict.Error.Code)
	m, err := h.memories.Get(ctx, tenant, scope, "a")
	require.NoError(t, err)
	require.Equal(t, "body a, changed by someone else", m.Body)
	h.dream(first.ID, "proposed")

	var second api.Dream
	require.Equal(t, http.StatusAccepted, h.call(http.MethodPost, "/v1/scopes/user:u-42/dream", &second))
	h.dream(second.ID, "proposed")
	h.dream(first.ID, "superseded")

	var list api.DreamList
	require.Equal(t, http.StatusOK, h.call(http.MethodGet, "/v1/scopes/user:u-42/dreams", &list))
	require.Len(t, list.Dreams, 2)
	require.Equal(t, second.ID, list.Dreams[0].ID)
	require.Nil(t, list.Dreams[0].Proposal, "lists leave proposals out")

	// Bad requests are refused with a reason.
	require.Equal(t, http.StatusBadRequest, h.call(http.MethodPost, "/v1/scopes/nope/dream", &conflict))
	require.Equal(t, "bad_scope", conflict.Error.Code)
	require.Equal(t, http.StatusNotFound, h.call(http.MethodGet, "/v1/dreams/no-such-dream", &conflict))
	require.Equal(t, http.StatusBadRequest, h.call(http.MethodGet, "/v1/dreams/not.a.token", &conflict))
	require.NoError(t, h.store.SetTenantSettings(ctx, tenant, []byte(`{"dreaming": {"enabled": false}}`)))
	require.Eventually(t, func() bool {
		return h.call(http.MethodPost, "/v1/scopes/user:u-42/dream", &conflict) == http.StatusConflict && conflict.Error.Code == "dreaming_disabled"
	}, 10*time.Second, 50*time.Millisecond)
}
