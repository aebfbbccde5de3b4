package proctest_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/proctest"
)

func TestSumMetric(t *testing.T) {
	t.Parallel()
	page := `# HELP mnemos_bus_deliveries_total Deliveries.
# TYPE mnemos_bus_deliveries_total counter
mnemos_bus_deliveries_total{consumer="compactor",otel_scope_name="compactor",result="acked"} 5
mnemos_bus_deliveries_total{consumer="compactor",otel_scope_name="compactor",result="retried"} 7
mnemos_bus_deliveries_total{consumer="token-accounting",result="acked"} 40
mnemos_bus_deliveries_total_created{consumer="compactor"} 1.7e9
mnemos_up 1
`
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"mnemos_bus_deliveries_total", nil, 52},
		{"mnemos_bus_deliveries_total", map[string]string{"consumer": "compactor"}, 12},
		{"mnemos_bus_deliveries_total", map[string]string{"consumer": "compactor", "result": "retried"}, 7},
		{"mnemos_bus_deliveries_total", map[string]string{"result": "dead_lettered"}, 0},
		{"mnemos_up", nil, 1},
		{"mnemos_absent", nil, 0},
	} {
		got, err := proctest.SumMetric(strings.NewReader(page), tc.name, tc.labels)
		require.NoError(t, err)
		require.InDelta(t, tc.want, got, 0, "%s %v", tc.name, tc.labels)
	}
	_, err := proctest.SumMetric(strings.NewReader("mnemos_up{a=\"b\"} many\n"), "mnemos_up", nil)
	require.Error(t, err)
}
