package proxy_test

import (
	"context"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestEachTenantReachesItsOwnUpstream: a tenant with its own upstream
// (store.SetTenantUpstream, as `mnemos tenant upstream` sets it) has its
// requests sent there with its own key; a tenant without one uses the
// process's; neither key reaches the other upstream.
func TestEachTenantReachesItsOwnUpstream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := upstream.Start(t, upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Final("from the shared upstream"), nil
	}})
	own := upstream.Start(t, upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) { return upstream.Final("from globex's upstream"), nil }})
	m := startMnemos(t, shared.URL, key)
	const globexKey, globexUpstreamKey = "mnm_proxy_globex_key", "sk-globex-own"
	require.NoError(t, m.store.EnsureTenant(ctx, "globex", "Globex"))
	require.NoError(t, m.store.AddAPIKey(ctx, "globex", "test", globexKey))
	require.NoError(t, m.store.SetTenantUpstream(ctx, "globex", store.ProviderAnthropic, store.Upstream{URL: own.URL, Key: globexUpstreamKey}))

	ask := func(apiKey string) string {
		t.Helper()
		c := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(m.api.URL), option.WithAPIKey(apiKey),
			option.WithMaxRetries(0), option.WithHeader("X-Mnemos-Session", "s"))
		got, err := c.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 64, Messages: []sdk.MessageParam{userText("who answers?")}})
		require.NoError(t, err)
		return got.Content[0].Text
	}
	require.Equal(t, "from globex's upstream", ask(globexKey))
	require.Equal(t, "from the shared upstream", ask(key))

	require.Len(t, own.Messages(), 1)
	require.Equal(t, globexUpstreamKey, own.Messages()[0].Header.Get("X-Api-Key"), "globex's upstream gets globex's key")
	require.Len(t, shared.Messages(), 1)
	require.Equal(t, upstreamKey, shared.Messages()[0].Header.Get("X-Api-Key"), "the shared upstream gets the process's key")
}
