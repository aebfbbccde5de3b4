//go:build linux

package faults_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
)

// TestAllInOneListensOnTheAPIAndAdminPortsOnly starts `mnemos -target=all`
// as a process with its embedded NATS, as `make run` does, and lists the
// TCP sockets it listens on: the API port and the operator listener, and no
// NATS port that a local process could publish turns on or read every
// tenant's from. The API port has no /metrics; the admin port does.
func TestAllInOneListensOnTheAPIAndAdminPortsOnly(t *testing.T) {
	t.Parallel()
	p := proctest.Mnemos(t, bins, "all", map[string]string{
		"MNEMOS_DATABASE_URL":       pgtest.URL(t),
		"MNEMOS_DATABASE_MAX_CONNS": "6",
		"MNEMOS_NATS_STORE_DIR":     t.TempDir(),
		"MNEMOS_DEV_API_KEY":        "off",
	}, "-target=all")

	listening, err := proctest.ListeningAddrs(p.Pid())
	require.NoError(t, err)
	var got []string
	for _, a := range listening {
		got = append(got, a.String())
	}
	require.ElementsMatch(t, []string{p.Addr(), p.AdminAddr()}, got, "the API and the admin port, nothing else")

	status := func(url string) int {
		resp, err := http.Get(url) //nolint:noctx // a test's request to its own child process
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusNotFound, status(p.URL()+"/metrics"))
	require.Equal(t, http.StatusOK, status(p.AdminURL()+"/metrics"))
}
