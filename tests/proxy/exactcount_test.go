package proxy_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/require"
)

// TestAnExactCountDecidesNearTheThreshold: a request whose estimate is just
// over the auto-compact threshold, but whose exact size is under it (a
// base64 attachment: the estimate takes it as dense text, 3 bytes per
// token; the upstream counts 4). Without proxy.exact_count_within_percent
// the estimate decides and the session is compacted before the call; with
// it, the proxy asks the upstream's count_tokens once and sends the
// request as it is.
func TestAnExactCountDecidesNearTheThreshold(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		within    float64
		counted   int
		compacted int64
	}{
		{"the estimate decides", 0, 0, 1},
		{"the exact count decides", 25, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			up, st, m := startNoted(t)
			ctx := context.Background()
			// Auto-compaction at 2% of the model's effective window: 3,600
			// tokens (warnings 1,000 and 500 tokens below it).
			require.NoError(t, st.SetTenantSettings(ctx, tenant, fmt.Appendf(nil,
				`{"tokens":{"auto_compact_percent":2,"warning_buffer":1000,"error_buffer":500},"proxy":{"exact_count_within_percent":%v}}`, c.within)))
			client := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(m.api.URL), option.WithAPIKey(key),
				option.WithMaxRetries(0), option.WithHeader("X-Mnemos-Session", "near"))

			msgs := []sdk.MessageParam{userText("Keep this attachment for later, please.")}
			answer, err := client.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 1024, Messages: msgs})
			require.NoError(t, err)
			sess := waitApplied(t, st, "near", 1)
			limits := sess.TokenCount
			// 12,000 bytes of base64: estimated at 4,000 tokens, counted at
			// about 3,000. With what the session holds, the estimate is 12%
			// over the threshold, the exact count 15% under it.
			raw := make([]byte, 9_000)
			_, _ = rand.Read(raw)
			msgs = append(msgs, answer.ToParam(), userText("Here it is: "+base64.StdEncoding.EncodeToString(raw)))
			_, err = client.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 1024, Messages: msgs})
			require.NoError(t, err)

			counts := 0
			for _, call := range up.Calls() {
				if call.Path == "/v1/messages/count_tokens" {
					counts++
				}
			}
			require.Equal(t, c.counted, counts, "count_tokens calls (the session held %d tokens)", limits)
			require.Equal(t, c.compacted, compactionsBeforeTheCall(t, st, "near"), "compactions before the call")
			if c.counted > 0 {
				require.EqualValues(t, 1, m.metrics.Sum("mnemos.proxy.exact_counts", "outcome", "under"), "the exact count came out under the estimate")
			}
		})
	}
}
