package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/retain"
	"github.com/mnemos-ai/mnemos/services/gateway"
)

// TestContextRendersAfterToolResultsExpire: once retention deleted an
// offloaded tool result, the session's context still renders with the
// preview, and the full result answers 404 tool_result_expired (an id
// never stored stays not_found).
func TestContextRendersAfterToolResultsExpire(t *testing.T) {
	t.Parallel()
	later := time.Now().Add(3 * 24 * time.Hour)
	h := setupWith(t, func(c *gateway.Config) { c.Retention.Now = func() time.Time { return later } })
	ctx := context.Background()
	id := h.offloaded(t, h.accountant(t), strings.Repeat("0123456789", 6_000)+"THE END")
	status, _, before := h.call(t, "GET", "/v1/sessions/s1/context", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(before))

	require.NoError(t, h.store.SetTenantSettings(ctx, "acme", []byte(`{"retention": {"tool_results_days": 2}}`)))
	res, err := h.gw.SweepRetention(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{retain.KindToolResults: 1}, res.Deleted)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.retention.deleted", "kind", retain.KindToolResults))

	status, _, after := h.call(t, "GET", "/v1/sessions/s1/context", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(after))
	require.Equal(t, string(before), string(after), "the render is what it was: the preview stays")
	require.Contains(t, string(after), "stored as tool result "+id)

	for _, c := range []struct{ id, key, code, why string }{
		{id, "key-acme", "tool_result_expired", "retention deleted it"},
		{"tr-never", "key-acme", "not_found", "never stored"},
		{id, "key-globex", "not_found", "another tenant learns nothing of the id"},
	} {
		status, _, raw := h.call(t, "GET", "/v1/tool-results/"+c.id, c.key, "", nil)
		require.Equal(t, http.StatusNotFound, status, string(raw))
		require.Equal(t, c.code, errorCode(t, raw), c.why)
	}

	cs := h.mcpClient(t, "X-Api-Key", "key-acme")
	text, isErr := callTool(t, cs, "read_tool_result", map[string]any{"id": id})
	require.True(t, isErr)
	require.Contains(t, text, "has expired", text)
}
