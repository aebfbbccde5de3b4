//go:build linux

package proctest_test

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
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

func TestListeningAddrs(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	ln6, err := net.Listen("tcp6", "[::1]:0")
	require.NoError(t, err)
	defer func() { _ = ln6.Close() }()
	// A connected socket is not a listening one.
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()

	addrs, err := proctest.ListeningAddrs(os.Getpid())
	require.NoError(t, err)
	require.Contains(t, addrs, netip.MustParseAddrPort(ln.Addr().String()))
	require.Contains(t, addrs, netip.MustParseAddrPort(ln6.Addr().String()))
	require.NotContains(t, addrs, netip.MustParseAddrPort(conn.LocalAddr().String()))

	require.NoError(t, ln.Close())
	addrs, err = proctest.ListeningAddrs(os.Getpid())
	require.NoError(t, err)
	require.NotContains(t, addrs, netip.MustParseAddrPort(ln.Addr().String()), "a closed listener is gone")
}

// TestCPUTime: the process's CPU time grows by about what a busy loop on
// one goroutine spent, never by less than the loop's CPU can be.
func TestCPUTime(t *testing.T) {
	before, err := proctest.CPUTime(os.Getpid())
	require.NoError(t, err)
	var sink uint64
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		for i := range 10_000 {
			sink += uint64(i) * sink
		}
	}
	after, err := proctest.CPUTime(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, after, before, "a busy loop of 300 ms used CPU (%d)", sink)
	_, err = proctest.CPUTime(1 << 30)
	require.Error(t, err, "no such process")
}
