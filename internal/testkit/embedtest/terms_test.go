package embedtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStemsMeetAcrossForms(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{"migrations", "migration"}, {"databases", "database"}, {"testing", "tests"}, {"tested", "test"},
		{"running", "run"}, {"Fridays", "friday"}, {"policies", "policy"}, {"staging", "stage"},
	} {
		require.Equal(t, Terms(pair[0]), Terms(pair[1]), "%q and %q", pair[0], pair[1])
	}
	require.Equal(t, []string{"run", "migration", "stag", "databas"}, Terms("Can you run the migration on the staging database?"))
	require.Empty(t, Terms("Can you do this for me, please?"), "function words carry no topic")
}
