package recall

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// TestAPickWithNULNamesItsMemory: NUL characters in a selector's pick (a
// model's answer may carry them, escaped in its JSON) are ignored, as in
// what models write elsewhere, rather than making the pick an invented name.
func TestAPickWithNULNamesItsMemory(t *testing.T) {
	scope, err := memory.NewScope(memory.KindProject, "repo-x")
	require.NoError(t, err)
	cands := []Candidate{{Header: memory.Header{Scope: scope, Name: "build-flags"}, Ref: Ref(scope, "build-flags")}}
	for _, pick := range []string{"project:repo-x/build\x00-flags", "build-flags\x00.md", "\x00build-flags"} {
		c, ok := resolve(pick, cands)
		require.True(t, ok, "%q", pick)
		require.Equal(t, memory.Name("build-flags"), c.Header.Name)
	}
	_, ok := resolve("build\x00-other", cands)
	require.False(t, ok)
}
