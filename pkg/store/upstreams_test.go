package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestTenantUpstreamPerProvider: a tenant holds one upstream per provider;
// setting, replacing or clearing one leaves the other, and another
// tenant's upstreams are never read.
func TestTenantUpstreamPerProvider(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	ctx := context.Background()
	for _, tenant := range []string{"acme", "globex"} {
		require.NoError(t, st.EnsureTenant(ctx, tenant, tenant))
	}

	for _, p := range store.Providers {
		_, err := st.TenantUpstream(ctx, "acme", p)
		require.ErrorIs(t, err, store.ErrNotFound, "no upstream of %s yet", p)
	}
	anth := store.Upstream{URL: "https://anthropic.acme.example", Key: "sk-ant-acme"}
	oai := store.Upstream{URL: "https://openai.acme.example/v1", Key: "sk-oai-acme"}
	require.NoError(t, st.SetTenantUpstream(ctx, "acme", store.ProviderAnthropic, anth))
	require.NoError(t, st.SetTenantUpstream(ctx, "acme", store.ProviderOpenAI, oai))
	got, err := st.TenantUpstream(ctx, "acme", store.ProviderAnthropic)
	require.NoError(t, err)
	require.Equal(t, anth, got)
	got, err = st.TenantUpstream(ctx, "acme", store.ProviderOpenAI)
	require.NoError(t, err)
	require.Equal(t, oai, got)

	// Setting again replaces that provider's only.
	oai2 := store.Upstream{URL: "https://vllm.acme.example/v1", Key: "sk-oai-acme-2"}
	require.NoError(t, st.SetTenantUpstream(ctx, "acme", store.ProviderOpenAI, oai2))
	got, err = st.TenantUpstream(ctx, "acme", store.ProviderOpenAI)
	require.NoError(t, err)
	require.Equal(t, oai2, got)
	got, err = st.TenantUpstream(ctx, "acme", store.ProviderAnthropic)
	require.NoError(t, err)
	require.Equal(t, anth, got)

	// Isolated per tenant: globex sees none of acme's, and its own stays its own.
	for _, p := range store.Providers {
		_, err := st.TenantUpstream(ctx, "globex", p)
		require.ErrorIs(t, err, store.ErrNotFound, "globex reads no upstream of acme's (%s)", p)
	}
	globex := store.Upstream{URL: "https://openai.globex.example/v1", Key: "sk-oai-globex"}
	require.NoError(t, st.SetTenantUpstream(ctx, "globex", store.ProviderOpenAI, globex))
	gone, err := st.DeleteTenantUpstream(ctx, "globex", store.ProviderAnthropic)
	require.NoError(t, err)
	require.False(t, gone, "globex had no anthropic upstream; acme's is not globex's to delete")
	got, err = st.TenantUpstream(ctx, "acme", store.ProviderOpenAI)
	require.NoError(t, err)
	require.Equal(t, oai2, got, "globex's upstream did not replace acme's")

	// Clearing one provider leaves the other.
	gone, err = st.DeleteTenantUpstream(ctx, "acme", store.ProviderOpenAI)
	require.NoError(t, err)
	require.True(t, gone)
	_, err = st.TenantUpstream(ctx, "acme", store.ProviderOpenAI)
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err = st.TenantUpstream(ctx, "acme", store.ProviderAnthropic)
	require.NoError(t, err)
	require.Equal(t, anth, got)
	gone, err = st.DeleteTenantUpstream(ctx, "acme", store.ProviderOpenAI)
	require.NoError(t, err)
	require.False(t, gone, "a second clear finds nothing")
	got, err = st.TenantUpstream(ctx, "globex", store.ProviderOpenAI)
	require.NoError(t, err)
	require.Equal(t, globex, got)

	// An unknown provider or tenant is refused.
	_, err = st.TenantUpstream(ctx, "acme", store.Provider("gemini"))
	require.ErrorContains(t, err, `unknown provider "gemini"`)
	require.ErrorContains(t, st.SetTenantUpstream(ctx, "acme", store.Provider(""), anth), "unknown provider")
	_, err = st.DeleteTenantUpstream(ctx, "acme", store.Provider("Anthropic"))
	require.ErrorContains(t, err, "unknown provider")
	require.ErrorIs(t, st.SetTenantUpstream(ctx, "initech", store.ProviderOpenAI, oai), store.ErrUnknownTenant)
}

// TestTenantUpstreamProviderColumn: the table itself refuses a provider
// Mnemos does not know, whatever writes it.
func TestTenantUpstreamProviderColumn(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	ctx := context.Background()
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	err := st.InTx(ctx, "acme", func(tx *store.Tx) error {
		var id string
		return tx.QueryRowForTest(ctx, `INSERT INTO tenant_upstreams (tenant_id, provider, url, api_key)
			VALUES ('acme', 'gemini', 'https://x', 'k') RETURNING tenant_id`).Scan(&id)
	})
	require.ErrorContains(t, err, "tenant_upstreams_provider_check")
}

func TestParseProvider(t *testing.T) {
	t.Parallel()
	for _, p := range store.Providers {
		got, err := store.ParseProvider(string(p))
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	_, err := store.ParseProvider("azure")
	require.EqualError(t, err, `unknown provider "azure": want anthropic or openai`)
}
