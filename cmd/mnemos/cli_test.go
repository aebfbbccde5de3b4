package main

import (
	"bytes"
	"context"
	"flag"
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
