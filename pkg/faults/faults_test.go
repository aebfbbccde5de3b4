package faults_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/faults"
)

func TestParse(t *testing.T) {
	t.Parallel()
	p, err := faults.Parse("token-accounting:5, compactor:1")
	require.NoError(t, err)
	require.Equal(t, faults.Points{"token-accounting": 5, "compactor": 1}, p)

	p, err = faults.Parse("")
	require.NoError(t, err)
	require.Empty(t, p)

	for _, bad := range []string{"compactor", "compactor:0", "compactor:x", ":3"} {
		_, err := faults.Parse(bad)
		require.Error(t, err, bad)
	}
}

func TestCrashAtTheNthHitOfItsPoint(t *testing.T) {
	t.Parallel()
	var crashed []string
	c := faults.NewCrash(faults.Points{"compactor": 3}, func(point string, hit int) {
		crashed = append(crashed, point)
		require.Equal(t, 3, hit)
	})
	for range 2 {
		c.Hit("compactor")
		c.Hit("token-accounting")
	}
	require.Empty(t, crashed)
	c.Hit("compactor")
	require.Equal(t, []string{"compactor"}, crashed)

	none := faults.NewCrash(nil, nil)
	require.Nil(t, none)
	none.Hit("compactor") // a process without crash points does nothing
}
