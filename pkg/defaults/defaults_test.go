package defaults_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/defaults"
)

type inner struct {
	Size int
	Name string
}

type config struct {
	Workers    int
	Timeout    time.Duration
	Ratio      float64
	Name       string
	On         bool
	Tools      []string
	Inner      inner
	Now        func() time.Time
	unexported int
}

func TestFillTakesDefaultsForWhatIsUnset(t *testing.T) {
	t.Parallel()
	def := config{Workers: 8, Timeout: time.Minute, Ratio: 0.5, Name: "d", On: true, Tools: []string{"Read"},
		Inner: inner{Size: 3, Name: "in"}, Now: time.Now, unexported: 7}
	cfg := config{Workers: -1, Timeout: 2 * time.Second, Inner: inner{Name: "mine"}}
	defaults.Fill(&cfg, def)
	require.Equal(t, 8, cfg.Workers, "a negative number is unset")
	require.Equal(t, 2*time.Second, cfg.Timeout, "a set value stays")
	require.InDelta(t, 0.5, cfg.Ratio, 0)
	require.Equal(t, "d", cfg.Name)
	require.False(t, cfg.On, "false is a choice: booleans are left alone")
	require.Equal(t, []string{"Read"}, cfg.Tools)
	require.Equal(t, inner{Size: 3, Name: "mine"}, cfg.Inner, "nested structs are filled field by field")
	require.NotNil(t, cfg.Now)
	require.Zero(t, cfg.unexported, "unexported fields are left alone")
}

func TestMeterIsNeverNil(t *testing.T) {
	t.Parallel()
	require.NotNil(t, defaults.Meter(nil))
}
