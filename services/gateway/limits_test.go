package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/limits"
)

// postTurn posts one event and returns the status, the error code and the
// Retry-After header.
func (h *harness) postTurn(t *testing.T, key, session string, seq int64) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/turns", bytes.NewReader(encode(t, event(session, seq))))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out.Error.Code, resp.Header.Get("Retry-After")
}

func TestTurnsOverTheRateAre429WithRetryAfter(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.store.SetTenantSettings(ctx, "acme", []byte(`{"limits": {"events_per_second": 0.5, "events_burst": 3}}`)))

	for seq := int64(1); seq <= 3; seq++ {
		status, code, _ := h.postTurn(t, "key-acme", "s1", seq)
		require.Equal(t, http.StatusAccepted, status, code)
	}
	status, code, retry := h.postTurn(t, "key-acme", "s1", 4)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, limits.ReasonRateLimited, code)
	secs, err := strconv.Atoi(retry)
	require.NoError(t, err, "Retry-After is whole seconds: %q", retry)
	require.GreaterOrEqual(t, secs, 1)
	require.LessOrEqual(t, secs, 2, "one token comes back every 2 s")

	// Another tenant has a bucket of its own.
	status, code, _ = h.postTurn(t, "key-globex", "g1", 1)
	require.Equal(t, http.StatusAccepted, status, code)

	require.EqualValues(t, 1, h.metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitEventsPerSecond))
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.turns.refused", "reason", limits.ReasonRateLimited))

	// Only the admitted events reached the bus, each marked as admitted so
	// the accountant does not count it again.
	c, err := h.bus.JetStream().OrderedConsumer(ctx, h.bus.StreamName(bus.StreamTurns), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	for range 4 {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		require.Equal(t, "gateway", m.Headers().Get(limits.HeaderAdmitted))
	}
	_, err = c.Next(jetstream.FetchMaxWait(200 * time.Millisecond))
	require.Error(t, err, "the refused event was not published")

	// The bucket refills: the refused event goes through once its token is back.
	require.Eventually(t, func() bool {
		status, _, _ := h.postTurn(t, "key-acme", "s1", 4)
		return status == http.StatusAccepted
	}, 20*time.Second, 250*time.Millisecond)
}

func TestNewSessionsBeyondTheCapAre429WhileActiveOnesWork(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.store.SetTenantSettings(ctx, "globex", []byte(`{"limits": {"active_sessions": 2, "active_minutes": 30}}`)))

	for _, s := range []string{"s1", "s2"} {
		status, code, _ := h.postTurn(t, "key-globex", s, 1)
		require.Equal(t, http.StatusAccepted, status, code)
	}
	status, code, retry := h.postTurn(t, "key-globex", "s3", 1)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, limits.ReasonTooManySessions, code)
	secs, err := strconv.Atoi(retry)
	require.NoError(t, err)
	require.Greater(t, secs, 25*60, "a slot frees when the oldest active session has been idle 30 minutes")
	require.LessOrEqual(t, secs, 30*60)

	// The active sessions keep working; another tenant is not capped.
	for _, s := range []string{"s1", "s2"} {
		status, code, _ := h.postTurn(t, "key-globex", s, 2)
		require.Equal(t, http.StatusAccepted, status, code)
	}
	status, _, _ = h.postTurn(t, "key-acme", "a3", 1)
	require.Equal(t, http.StatusAccepted, status)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitActiveSessions))

	// Once s1 has been idle past the window, s3 takes its slot.
	_, err = pgtest.Admin(t, h.store).Exec(ctx, "UPDATE active_sessions SET active_at = now() - interval '31 minutes' WHERE tenant_id = 'globex' AND session_id = 's1'")
	require.NoError(t, err)
	status, code, _ = h.postTurn(t, "key-globex", "s3", 1)
	require.Equal(t, http.StatusAccepted, status, code)
	status, code, _ = h.postTurn(t, "key-globex", fmt.Sprintf("s%d", 4), 1)
	require.Equal(t, http.StatusTooManyRequests, status, code)
}
