package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProblems(t *testing.T) {
	long := "gateway: " + strings.Repeat("x", MaxSubject-len("gateway: "))
	for _, tc := range []struct {
		msg  string
		want string // a part of the only problem, or "" for none
	}{
		{"gateway: place a raced round again from the store", ""},
		{"gateway: place a raced round again\n", ""},
		{"tests/proxy: unique request tags\n\nTook 41 s, was 95 s.\n", ""},
		{"docs/testing.md, Makefile: add make test-fast", ""},
		{"make lint: check commit messages", ""},
		{".ci/run: install nats-server when missing", ""},
		{long, ""},
		{long + "y", "73 characters, more than 72"},
		{"gateway: place a raced round — again from the store, not its tip, it was a leftover", "more than 72"},
		{"Place a raced round again", "not `area: summary`"},
		{"gateway:place a raced round", "not `area: summary`"},
		{"gateway : place a raced round", "not `area: summary`"},
		{"the gateway and the proxy: place a raced round", "not `area: summary`"},
		{`Revert "gateway: place a raced round"`, "not `area: summary`"},
		{"fixup! gateway: place a raced round", "not `area: summary`"},
		{"gateway:", "not `area: summary`"},
		{"gateway: ", "white space"},
		{"", "subject is empty"},
		{" gateway: place a raced round", "white space"},
		{"gateway: place a raced round.", "full stop"},
		{"gateway: place a raced round\nagain from the store", "no blank line"},
	} {
		got := Problems(tc.msg)
		if tc.want == "" {
			require.Empty(t, got, "%q", tc.msg)
			continue
		}
		require.Len(t, got, 1, "%q: %v", tc.msg, got)
		require.Contains(t, got[0], tc.want, "%q", tc.msg)
	}
}

func TestSelfIsThisFile(t *testing.T) {
	_, err := os.Stat(filepath.Join("..", "..", Self))
	require.NoError(t, err, "Self must name this file: the commit that added it is where checking starts")
}

// repo is a git repository in a temporary directory, with a fixed identity
// and no configuration of the machine's.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, v := range []string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"} {
		t.Setenv(v, "Test")
	}
	for _, v := range []string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(v, "test@example.com")
	}
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	out, err := git(r.dir, args...)
	require.NoError(r.t, err)
	return strings.TrimSpace(out)
}

// commit writes path (a new line each time) and commits it with msg.
func (r *repo) commit(path, msg string) string {
	r.t.Helper()
	full := filepath.Join(r.dir, path)
	require.NoError(r.t, os.MkdirAll(filepath.Dir(full), 0o755))
	f, err := os.OpenFile(full, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(r.t, err)
	_, err = f.WriteString(msg + "\n")
	require.NoError(r.t, err)
	require.NoError(r.t, f.Close())
	r.git("add", path)
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

func TestCheckStartsAfterTheCommitThatAddedIt(t *testing.T) {
	r := newRepo(t)
	r.commit("a", "An old subject that says far more than seventy-two characters ever should, in one line")
	r.git("branch", "older")
	added := r.commit(Self, "make lint: check commit messages")
	r.commit("a", "gateway: a subject that follows the rule")

	start, err := Start(r.dir)
	require.NoError(t, err)
	require.Equal(t, added, start)
	n, err := Check(r.dir)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the commit that adds the check and the ones before it are not checked")

	// A branch forked before the check, merged after it: its commits were
	// made before the rule and are left alone, and so is the merge.
	r.git("checkout", "-q", "older")
	r.commit("b", "Older branch: yet another subject that goes on well past the seventy-two characters")
	r.git("checkout", "-q", "main")
	r.git("merge", "-q", "--no-ff", "-m", "Merge branch 'older', whose subject is not checked because it is a merge", "older")
	n, err = Check(r.dir)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	bad := r.commit("a", "Fix the store's lock order")
	r.commit("a", "store: fine")
	n, err = Check(r.dir)
	require.Equal(t, 3, n)
	require.ErrorContains(t, err, "commit "+bad[:12]+` "Fix the store's lock order"`)
	require.ErrorContains(t, err, "1 of 3 commits since "+added[:12])
	require.NotContains(t, err.Error(), "fine")
}

func TestCheckFollowsARebase(t *testing.T) {
	r := newRepo(t)
	r.commit("a", "gateway: first")
	r.git("checkout", "-q", "-b", "topic")
	r.commit(Self, "make lint: check commit messages")
	r.commit("a", "gateway: no area here is fine, but a full stop is not.")
	r.git("checkout", "-q", "main")
	r.commit("b", "Concurrent work on main, before the check, with a subject far too long to pass it")
	r.git("checkout", "-q", "topic")
	r.git("rebase", "-q", "main")

	start, err := Start(r.dir)
	require.NoError(t, err)
	require.Equal(t, r.git("rev-parse", "HEAD~1"), start, "the rebased commit that adds the check")
	n, err := Check(r.dir)
	require.Equal(t, 1, n)
	require.ErrorContains(t, err, "full stop")
}

func TestCheckWithoutTheFile(t *testing.T) {
	r := newRepo(t)
	r.commit("a", "gateway: first")
	_, err := Check(r.dir)
	require.ErrorContains(t, err, "no commit in the history of HEAD adds "+Self)
}
