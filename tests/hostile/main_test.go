// Package hostile_test runs Mnemos as a real process and treats it the way
// a hostile tenant with a valid key would: the largest session and the
// largest turns its limits allow, requested by hundreds of clients at once.
// It asserts that the process stays within its bounds (every request
// answered, /readyz green, peak RSS capped) and that another tenant is
// still served about as fast as at rest, measuring both in the same run.
package hostile_test

import (
	"testing"

	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
)

// bins are the mnemos binary and nats-server built once for this run.
var bins proctest.Binaries

func TestMain(m *testing.M) { proctest.Main(m, &bins) }
