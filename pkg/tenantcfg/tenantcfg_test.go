package tenantcfg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

var defaults = tenantcfg.Defaults()

func TestOverlayChangesOnlyWhatIsNamed(t *testing.T) {
	t.Parallel()
	s, err := tenantcfg.Overlay(defaults, []byte(`{"tokens": {"auto_compact_percent": 80}, "offload": {"threshold_chars": 20000}}`))
	require.NoError(t, err)
	want := defaults
	want.Tokens.AutoCompactPercent = 80
	want.Offload.ThresholdChars = 20_000
	require.Equal(t, want, s)

	for _, empty := range []string{"", "  ", "{}"} {
		s, err := tenantcfg.Overlay(defaults, []byte(empty))
		require.NoError(t, err)
		require.Equal(t, defaults, s, "%q keeps the defaults", empty)
	}
}

func TestOverlayRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		`{"tokens": {"auto_compact_prcent": 80}}`:           "unknown field",
		`{"tokens": {"auto_compact_percent": 180}}`:         "auto_compact_percent",
		`{"offload": {"preview_bytes": 90000}}`:             "preview_bytes",
		`{"tokens": {"default_window": 1000}}`:              "default_window",
		`{"tokens": {"warning_buffer": "twenty thousand"}}`: "cannot unmarshal",
		`[1, 2]`:                                "cannot unmarshal",
		`{"limits": {"events_per_second": -5}}`: "events_per_second",
		`{"limits": {"events_burst": 0}}`:       "events_burst",
		`{"limits": {"active_sessions": 10, "active_minutes": 0}}`: "active_minutes",
	} {
		_, err := tenantcfg.Overlay(defaults, []byte(doc))
		require.ErrorContains(t, err, want, doc)
	}
}

func TestCacheReadsOncePerTTL(t *testing.T) {
	t.Parallel()
	reads := 0
	doc := `{"tokens": {"auto_compact_percent": 50}}`
	c, err := tenantcfg.NewCache(defaults, func(_ context.Context, tenant string) ([]byte, error) {
		reads++
		if tenant == "ghost" {
			return nil, errors.New("no such tenant")
		}
		return []byte(doc), nil
	}, time.Hour)
	require.NoError(t, err)
	for range 3 {
		s, err := c.For(context.Background(), "acme")
		require.NoError(t, err)
		require.InDelta(t, 50, s.Tokens.AutoCompactPercent, 0)
	}
	require.Equal(t, 1, reads)
	_, err = c.For(context.Background(), "ghost")
	require.ErrorContains(t, err, "no such tenant")
}
