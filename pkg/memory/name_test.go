package memory_test

import (
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

func reasonOf(t *testing.T, err error) memory.Reason {
	t.Helper()
	e, ok := memory.AsError(err)
	require.True(t, ok, "want a *memory.Error, got %v", err)
	require.NotEmpty(t, e.Detail, "a refusal says why")
	return e.Reason
}

func TestParseName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "testing", "feedback_testing-style", "0day", strings.Repeat("x", memory.MaxNameLen)} {
		n, err := memory.ParseName(ok)
		require.NoError(t, err, ok)
		require.Equal(t, ok+".md", n.File())
	}
	for in, want := range map[string]memory.Reason{
		"":                                  memory.ReasonBadName,
		"Testing":                           memory.ReasonBadName,
		"-lead":                             memory.ReasonBadName,
		"_lead":                             memory.ReasonBadName,
		"with space":                        memory.ReasonBadName,
		"dot.name":                          memory.ReasonBadName,
		"x.md":                              memory.ReasonBadName,
		"nul\x00byte":                       memory.ReasonBadName,
		"caf\xc3":                           memory.ReasonBadName,
		"é":                                 memory.ReasonBadName,
		strings.Repeat("x", 65):             memory.ReasonBadName,
		"..":                                memory.ReasonOutOfScope,
		"../other":                          memory.ReasonOutOfScope,
		"a..b":                              memory.ReasonOutOfScope,
		"/etc/passwd":                       memory.ReasonOutOfScope,
		"sub/name":                          memory.ReasonOutOfScope,
		`back\slash`:                        memory.ReasonOutOfScope,
		"user:u-1":                          memory.ReasonOutOfScope,
		"~root":                             memory.ReasonOutOfScope,
		"project:other/../../user:u-1/x.md": memory.ReasonOutOfScope,
	} {
		_, err := memory.ParseName(in)
		require.Equal(t, want, reasonOf(t, err), "%q", in)
	}
	n, err := memory.ParseRef("testing.md")
	require.NoError(t, err)
	require.Equal(t, memory.Name("testing"), n, "a file name is accepted for its name")
	_, err = memory.ParseRef("testing.md.md")
	require.Error(t, err)
}

func TestParseScope(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"user:u-42", "project:repo_x", "local:U1", "agent:code-reviewer"} {
		s, err := memory.ParseScope(ok)
		require.NoError(t, err, ok)
		require.Equal(t, ok, s.String())
	}
	for _, bad := range []string{"", "user", "user:", "team:x", "user:-x", "user:a/b", "user:a:b", "user:" + strings.Repeat("a", 129), "USER:x", "user: x"} {
		_, err := memory.ParseScope(bad)
		require.Equal(t, memory.ReasonBadScope, reasonOf(t, err), "%q", bad)
	}
	got := memory.ScopesOf(map[string]string{"agent": "reviewer", "project": "repo-x", "user": "u-42", "team": "t", "local": "bad/id"})
	require.Equal(t, []memory.Scope{{Kind: memory.KindUser, ID: "u-42"}, {Kind: memory.KindProject, ID: "repo-x"}, {Kind: memory.KindAgent, ID: "reviewer"}}, got,
		"in the order user, project, local, agent; unknown keys and bad ids left out")
}

// FuzzScopePath: whatever a scope and a name are, when both are valid the
// memory's path lies directly inside its scope's directory, the scope
// reads back from its string, the name from its file, and two different
// scopes never share a directory.
func FuzzScopePath(f *testing.F) {
	for _, seed := range [][2]string{
		{"user:u-42", "testing"}, {"project:repo", "../x"}, {"local:a", "a..b"}, {"agent:t", "/abs"},
		{"user:a", "x/y"}, {"user:..", "x"}, {"user:a/b", "n"}, {"project:p", "name.md"}, {"user:u", "nul\x00"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, scopeText, nameText string) {
		scope, serr := memory.ParseScope(scopeText)
		name, nerr := memory.ParseName(nameText)
		if serr == nil {
			require.Equal(t, scopeText, scope.String())
			back, err := memory.ParseScope(scope.String())
			require.NoError(t, err)
			require.Equal(t, scope, back)
			require.True(t, filepath.IsLocal(scope.Dir()), scope.Dir())
			require.Equal(t, scope.Dir(), path.Clean(scope.Dir()), "a scope's directory is clean")
			require.Equal(t, 3, strings.Count(scope.Dir(), "/")+1, "memory/<kind>/<id>")
		}
		if nerr == nil {
			require.Equal(t, nameText, string(name))
			file := name.File()
			require.True(t, filepath.IsLocal(file), file)
			require.NotContains(t, file, "/")
			require.NotContains(t, file, `\`)
			require.NotContains(t, file, "..")
			require.NotContains(t, file, "\x00")
			back, err := memory.ParseRef(file)
			require.NoError(t, err)
			require.Equal(t, name, back)
		}
		if serr == nil && nerr == nil {
			p := scope.Path(name)
			require.Equal(t, p, path.Clean(p))
			require.Equal(t, scope.Dir(), path.Dir(p), "the file lies directly in its scope's directory")
			require.True(t, strings.HasPrefix(path.Clean(path.Join(scope.Dir(), name.File())), scope.Dir()+"/"))
			require.NotEqual(t, scope.IndexPath(), p, "no memory is the index")
		}
		// Two scopes that differ never share a directory.
		other, oerr := memory.ParseScope(nameText)
		if serr == nil && oerr == nil && other != scope {
			require.NotEqual(t, scope.Dir(), other.Dir())
		}
	})
}

// FuzzParseName: no input panics, and a refused name is refused with a reason.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{"testing", "..", "a/b", "x.md", "~", "user:x", "\x00", "é", strings.Repeat("a", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := memory.ParseName(s)
		if err != nil {
			e, ok := memory.AsError(err)
			require.True(t, ok)
			require.Contains(t, []memory.Reason{memory.ReasonBadName, memory.ReasonOutOfScope}, e.Reason)
			return
		}
		require.LessOrEqual(t, len(n), memory.MaxNameLen)
		require.True(t, filepath.IsLocal(n.File()))
		require.Equal(t, filepath.Base(n.File()), n.File())
	})
}
