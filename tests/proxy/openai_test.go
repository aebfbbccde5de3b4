package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	mnemosclient "github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestTheOpenAIDoorListsTheTenantsModels: the official OpenAI SDK, pointed
// at Mnemos with a tenant's Mnemos key, lists the models of the tenant's
// OpenAI upstream, which gets the key Mnemos holds for it; a tenant without
// an OpenAI upstream, and a key Mnemos does not know, are answered in
// OpenAI's error shape.
func TestTheOpenAIDoorListsTheTenantsModels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	up := responses.Start(t, responses.Config{Script: func(*responses.Request) (responses.Reply, error) {
		return responses.Say(responses.Text("unused")), nil
	}})
	m := startMnemos(t, "http://127.0.0.1:1", key)
	require.NoError(t, m.store.SetTenantUpstream(ctx, tenant, store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(up.URL, "/v1"), Key: "sk-acme-openai"}))
	const globexKey = "mnm_proxy_globex_openai"
	require.NoError(t, m.store.EnsureTenant(ctx, "globex", "Globex"))
	require.NoError(t, m.store.AddAPIKey(ctx, "globex", "test", globexKey))
	client := func(apiKey string) *openai.Client {
		c := openai.NewClient(oaioption.WithBaseURL(m.api.URL+"/v1"), oaioption.WithAPIKey(apiKey), oaioption.WithMaxRetries(0))
		return &c
	}

	page, err := client(key).Models.List(ctx)
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	require.Equal(t, "gpt-5", page.Data[0].ID)
	listed, err := mnemosclient.New(m.api.URL, key).ListModels(ctx)
	require.NoError(t, err)
	require.Contains(t, string(listed), `"gpt-5"`, "Mnemos's Go client reads the same list")
	calls := up.Calls()
	require.Len(t, calls, 2)
	require.Equal(t, "Bearer sk-acme-openai", calls[0].Header.Get("Authorization"), "the upstream gets the key Mnemos holds, never the client's")

	var apiErr *openai.Error
	_, err = client(globexKey).Models.List(ctx)
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
	require.Equal(t, "no_upstream", apiErr.Code, "globex has no OpenAI upstream, and acme's is not lent to it")
	require.Len(t, up.Calls(), 2)

	_, err = client("mnm_nobody").Models.List(ctx)
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
	require.Equal(t, "invalid_request_error", apiErr.Type)
}
