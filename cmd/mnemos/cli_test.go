package main

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrateHelpTouchesNoDatabase: `mnemos migrate --help` prints its
// usage and asks for exit 0 (flag.ErrHelp, which main exits 0 on) without
// migrating: the owner's URL here answers nothing, so a migration would
// fail.
func TestMigrateHelpTouchesNoDatabase(t *testing.T) {
	t.Parallel()
	vars := env(map[string]string{"MNEMOS_MIGRATE_DATABASE_URL": "postgres://owner@127.0.0.1:1/mnemos?sslmode=disable&connect_timeout=1"})
	for _, arg := range []string{"-h", "-help", "--help"} {
		var out bytes.Buffer
		err := run(context.Background(), []string{"migrate", arg}, vars, &out, &out)
		require.ErrorIs(t, err, flag.ErrHelp, "mnemos migrate %s", arg)
		require.Contains(t, out.String(), "Usage: mnemos migrate", arg)
	}
	var out bytes.Buffer
	require.ErrorContains(t, run(context.Background(), []string{"migrate", "now"}, vars, &out, &out), `unexpected argument "now"`)
}

// TestHealthcheckTakesTheURLItsUsageNames: `mnemos healthcheck URL` asks
// the mnemos at URL (its /readyz when the URL names no path, as in
// http://host:port), and --help prints the usage.
func TestHealthcheckTakesTheURLItsUsageNames(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, url := range []string{srv.URL, srv.URL + "/", strings.TrimPrefix(srv.URL, "http://"), srv.URL + "/readyz"} {
		var out bytes.Buffer
		require.NoError(t, run(ctx, []string{"healthcheck", url}, env(nil), &out, &out), url)
		require.Contains(t, out.String(), srv.URL+"/readyz: ready", url)
	}
	var out bytes.Buffer
	require.ErrorContains(t, run(ctx, []string{"healthcheck", srv.URL + "/elsewhere"}, env(nil), &out, &out), "404", "a path given is asked as is")

	for _, arg := range []string{"-h", "--help"} {
		out.Reset()
		require.ErrorIs(t, run(ctx, []string{"healthcheck", arg}, env(nil), &out, &out), flag.ErrHelp, arg)
		require.Contains(t, out.String(), "Usage: mnemos healthcheck [URL]", arg)
	}
	require.ErrorContains(t, run(ctx, []string{"healthcheck", srv.URL, "more"}, env(nil), &out, &out), `unexpected argument "more"`)
	require.ErrorContains(t, run(ctx, []string{"healthcheck", "http://[::1"}, env(nil), &out, &out), "healthcheck")
}
