package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/archivetest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestExportAndImportOnTheCommandLine: a directory as Claude Code keeps
// it is imported, exported as an archive and as a directory, and the
// archive imported into another scope gives the same memories and index;
// a bad archive writes nothing; both are audited as the command line.
func TestExportAndImportOnTheCommandLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	vars := env(map[string]string{"MNEMOS_DATABASE_URL": dbURL})
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"tenant", "create", "acme"}, vars, &out, &out))

	src := t.TempDir()
	docs := map[string]memory.Document{
		"testing": {Name: "testing", Description: "Integration tests hit a real database", Type: memory.TypeFeedback, Body: "Never mocks."},
		"deploy":  {Name: "deploy", Description: "Deploys go through the staging cluster", Type: memory.TypeProject, Body: "Staging first."},
	}
	for n, d := range docs {
		require.NoError(t, os.WriteFile(filepath.Join(src, n+".md"), []byte(d.Markdown()), 0o600))
	}
	const index = "- [Testing](testing.md) — real database\n- [Deploy](deploy.md) — staging first\n"
	require.NoError(t, os.WriteFile(filepath.Join(src, "MEMORY.md"), []byte(index), 0o600))

	out.Reset()
	require.NoError(t, run(ctx, []string{"import", "-tenant", "acme", "-scope", "project:p1", src}, vars, &out, &out))
	require.Contains(t, out.String(), "2 created, 0 updated, 0 unchanged; index from the archive")

	file := filepath.Join(t.TempDir(), "p1.tar.gz")
	require.NoError(t, run(ctx, []string{"export", "-tenant", "acme", "-scope", "project:p1", "-o", file}, vars, &out, &out))
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	names, files := archivetest.Files(t, raw)
	require.Equal(t, []string{"memory/", "memory/MEMORY.md", "memory/deploy.md", "memory/testing.md"}, names)
	require.Equal(t, index, files["memory/MEMORY.md"])
	require.Equal(t, docs["testing"].Markdown(), files["memory/testing.md"])

	dir := filepath.Join(t.TempDir(), "memory")
	require.NoError(t, run(ctx, []string{"export", "-tenant", "acme", "-scope", "project:p1", "-dir", dir}, vars, &out, &out))
	got, err := os.ReadFile(filepath.Join(dir, "deploy.md"))
	require.NoError(t, err)
	require.Equal(t, docs["deploy"].Markdown(), string(got))

	out.Reset()
	require.NoError(t, run(ctx, []string{"import", "-tenant", "acme", "-scope", "user:u1", file}, vars, &out, &out))
	require.Contains(t, out.String(), "2 created")

	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 1})
	require.NoError(t, err)
	defer st.Close()
	mem, err := memory.NewStore(st, nil, memory.Options{})
	require.NoError(t, err)
	ix, exported, err := mem.Export(ctx, "acme", memory.Scope{Kind: memory.KindUser, ID: "u1"}, nil)
	require.NoError(t, err)
	require.Equal(t, index, ix.Content)
	require.Equal(t, []memory.Document{docs["deploy"], docs["testing"]}, exported)

	// A bad file refuses the whole directory.
	require.NoError(t, os.WriteFile(filepath.Join(src, "extra.md"), []byte(docs["deploy"].Markdown()), 0o600))
	err = run(ctx, []string{"import", "-tenant", "acme", "-scope", "project:p2", src}, vars, &out, &out)
	e, ok := memory.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, memory.ReasonNameMismatch, e.Reason)
	require.Contains(t, e.Detail, "extra.md")
	_, none, err := mem.Export(ctx, "acme", memory.Scope{Kind: memory.KindProject, ID: "p2"}, nil)
	require.NoError(t, err)
	require.Empty(t, none)

	log, err := st.AuditLog(ctx, "acme", 0, 100)
	require.NoError(t, err)
	var actions []string
	for _, r := range log {
		if r.Actor == cliActor {
			actions = append(actions, r.Action+" "+r.Target)
		}
	}
	require.Subset(t, actions, []string{"scope.import project:p1", "scope.export project:p1", "scope.import user:u1"})
}
