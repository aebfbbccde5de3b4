package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/archive"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/ingest"
)

// The usage lines of export and import: a memory scope, read and written
// in the database; a session's history, through the API.
var (
	exportUsage = [][2]string{
		{"export -tenant T -scope SCOPE [-o FILE | -dir DIR]", "write a memory scope as Claude Code's memory directory (a .tar.gz, or files)"},
		{"export -session ID [-url URL] [-api-key KEY] [-o FILE]", "write a session's history as turn events, one JSON line each (the API's export)"},
	}
	importUsage = [][2]string{
		{"import -tenant T -scope SCOPE FILE|DIR", "write such an archive or directory into a memory scope, all or nothing"},
		{"import -session ID [-url URL] [-api-key KEY] FILE", "publish such a history into a session, every line checked before any is sent"},
	}
)

// sessionFlags are the flags of a session's export and import, which go
// through the API: the accountant applies an import's events from the bus,
// and the API's key names the tenant.
type sessionFlags struct {
	session, url, apiKey *string
}

func newSessionFlags(fs *flag.FlagSet, getenv func(string) string) sessionFlags {
	return sessionFlags{
		session: fs.String("session", "", "a session's history instead of a scope: the session ID (through the API at -url)"),
		url:     fs.String("url", "http://localhost:8080", "with -session: the Mnemos API"),
		apiKey:  fs.String("api-key", getenv("MNEMOS_API_KEY"), "with -session: an API key of the tenant (default $MNEMOS_API_KEY)"),
	}
}

// client is the API client of a session's export or import, after the
// flags that belong to scopes were checked unset.
func (f sessionFlags) client(fs *flag.FlagSet, sf scopeFlags) (*client.Client, error) {
	if *sf.tenant != "" || *sf.scope != "" {
		fs.Usage()
		return nil, fmt.Errorf("%s: -session goes through the API, whose key names the tenant: give -session, or -tenant and -scope", fs.Name())
	}
	if !turn.ValidToken(*f.session) {
		return nil, fmt.Errorf("%s: -session: want a session ID of letters, digits, '_' and '-'", fs.Name())
	}
	if *f.apiKey == "" {
		return nil, fmt.Errorf("%s: -session needs -api-key (or MNEMOS_API_KEY), a key with the scope read (export) or ingest (import)", fs.Name())
	}
	return client.New(*f.url, *f.apiKey), nil
}

// scopeFlags are the flags export and import share.
type scopeFlags struct {
	tenant, scope *string
}

func newScopeFlags(fs *flag.FlagSet) scopeFlags {
	return scopeFlags{
		tenant: fs.String("tenant", "", "the tenant ID"),
		scope:  fs.String("scope", "", "the memory scope: user:<id>, project:<id>, local:<id> or agent:<type>"),
	}
}

func (f scopeFlags) parse(fs *flag.FlagSet) (string, memory.Scope, error) {
	if *f.tenant == "" || !bus.ValidToken(*f.tenant) {
		fs.Usage()
		return "", memory.Scope{}, fmt.Errorf("%s: -tenant: want a tenant ID of letters, digits, '_' and '-'", fs.Name())
	}
	scope, err := memory.ParseScope(*f.scope)
	if err != nil {
		fs.Usage()
		return "", memory.Scope{}, fmt.Errorf("%s: -scope: %w", fs.Name(), err)
	}
	return *f.tenant, scope, nil
}

// memoryStore opens the database and the tenant's memories, with its
// limits, for export and import; the tenant must exist.
func memoryStore(ctx context.Context, getenv func(string) string, tenant string) (*store.Store, *memory.Store, error) {
	st, err := tenantStore(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	if _, err := st.TenantSettings(ctx, tenant); err != nil {
		st.Close()
		return nil, nil, err // an unknown tenant
	}
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Minute)
	if err == nil {
		var mem *memory.Store
		if mem, err = memory.NewStore(st, nil, memory.Options{Limits: settings.MemoryLimits}); err == nil {
			return st, mem, nil
		}
	}
	st.Close()
	return nil, nil, err
}

// runExport writes a scope as GET /v1/scopes/{scope}/export does, to a
// file, standard output, or a directory; the audit log names the command
// line as the actor.
func runExport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("export", exportUsage[0][0]+"\n       mnemos "+exportUsage[1][0], "Writes SCOPE of tenant T as a gzipped tar of memory/MEMORY.md and memory/<name>.md (to FILE, or\nstandard output), or as those files in DIR: extracted into ~/.claude/projects/<project>/memory/,\nthey are what Claude Code reads. With -session, writes the session's history as turn events, one\nJSON line each in seq order, as GET /v1/sessions/{id}/export answers it.", stderr)
	sf, ssf := newScopeFlags(fs), newSessionFlags(fs, getenv)
	out := fs.String("o", "", "write the archive (or the session's history) to this file (default: standard output)")
	dir := fs.String("dir", "", "write MEMORY.md and <name>.md into this directory instead of an archive")
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	if *ssf.session != "" {
		if *dir != "" {
			return errors.New("export: -dir is for scopes; give -o for a session")
		}
		return exportSession(ctx, fs, sf, ssf, *out, stdout, stderr)
	}
	tenant, scope, err := sf.parse(fs)
	if err != nil {
		return err
	}
	if *out != "" && *dir != "" {
		return errors.New("export: give -o or -dir, not both")
	}
	st, mem, err := memoryStore(ctx, getenv, tenant)
	if err != nil {
		return err
	}
	defer st.Close()
	ix, docs, err := archive.Export(ctx, mem, tenant, scope, cliActor)
	if err != nil {
		return err
	}
	if *dir != "" {
		if err := archive.WriteDir(*dir, ix.Content, docs); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "export: %d memories and MEMORY.md of %s written into %s\n", len(docs), scope, *dir)
		return nil
	}
	modTime := ix.UpdatedAt
	if modTime.IsZero() {
		modTime = time.Now().UTC().Truncate(time.Second)
	}
	raw, err := archive.Bytes(ix.Content, docs, modTime)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = stdout.Write(raw)
		return err
	}
	if err := os.WriteFile(*out, raw, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "export: %d memories and MEMORY.md of %s written to %s\n", len(docs), scope, *out)
	return nil
}

// runImport writes an archive (or a directory of the same files) into a
// scope, as POST /v1/scopes/{scope}/import does.
func runImport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("import", importUsage[0][0]+"\n       mnemos "+importUsage[1][0], "Writes the memories of FILE (a gzipped tar as export writes it) or DIR (MEMORY.md and <name>.md,\nas Claude Code keeps them) into SCOPE of tenant T, each a revision by the actor import, all or\nnothing. The archive's MEMORY.md becomes the index when every line of it is valid. With -session,\npublishes FILE, turn events one a line as export -session writes them, into the session through\nPOST /v1/sessions/{id}/import: a bad line refuses the whole file, publishing nothing.", stderr)
	sf, ssf := newScopeFlags(fs), newSessionFlags(fs, getenv)
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	src := fs.Arg(0)
	if src == "" {
		fs.Usage()
		return errors.New("import: name the FILE or DIR to import")
	}
	if *ssf.session != "" {
		return importSession(ctx, fs, sf, ssf, src, stdout)
	}
	tenant, scope, err := sf.parse(fs)
	if err != nil {
		return err
	}
	st, mem, err := memoryStore(ctx, getenv, tenant)
	if err != nil {
		return err
	}
	defer st.Close()
	l, err := mem.Limits(ctx, tenant)
	if err != nil {
		return err
	}
	a, err := readArchive(src, archive.LimitsFor(l))
	if err != nil {
		return fmt.Errorf("import %s: %w", src, err)
	}
	res, err := archive.Import(ctx, mem, tenant, scope, a, cliActor)
	if err != nil {
		return fmt.Errorf("import %s: %w", src, err)
	}
	fmt.Fprintf(stdout, "import into %s: %d created, %d updated, %d unchanged; index from the %s\n",
		scope, len(res.Created), len(res.Updated), len(res.Unchanged), res.IndexFrom)
	if res.IndexProblem != "" {
		fmt.Fprintf(stdout, "the archive's MEMORY.md was not used: %s\n", res.IndexProblem)
	}
	return nil
}

// exportSession writes a session's history, as the API streams it, to
// the file out (written whole or removed) or to standard output.
func exportSession(ctx context.Context, fs *flag.FlagSet, sf scopeFlags, f sessionFlags, out string, stdout, stderr io.Writer) error {
	c, err := f.client(fs, sf)
	if err != nil {
		return err
	}
	if out == "" {
		_, err := c.ExportSession(ctx, *f.session, stdout)
		return err
	}
	file, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) //nolint:gosec // the operator names the file
	if err != nil {
		return err
	}
	n, err := c.ExportSession(ctx, *f.session, file)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(out) // a history cut short is no history; the error says why
		return fmt.Errorf("export: session %s: %w", *f.session, err)
	}
	fmt.Fprintf(stderr, "export: the history of session %s written to %s (%d bytes)\n", *f.session, out, n)
	return nil
}

// importSession sends the history in src to the session's import.
func importSession(ctx context.Context, fs *flag.FlagSet, sf scopeFlags, f sessionFlags, src string, stdout io.Writer) error {
	c, err := f.client(fs, sf)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.Size() > ingest.DefaultMaxImportBytes {
		return fmt.Errorf("import %s: %d bytes, more than the %d an import takes: import it in parts, each its lines in order", src, fi.Size(), ingest.DefaultMaxImportBytes)
	}
	body, err := os.ReadFile(src) //nolint:gosec // the operator names the file to import
	if err != nil {
		return err
	}
	res, err := c.ImportSession(ctx, *f.session, body)
	if err != nil {
		return fmt.Errorf("import %s: %w", src, err)
	}
	fmt.Fprintf(stdout, "import into session %s: %d events published (%d already were), %d messages, seq %d to %d; applied when its applied_seq reaches %d\n",
		res.SessionID, res.Events, res.Duplicates, res.Messages, res.FirstSeq, res.LastSeq, res.LastSeq)
	return nil
}

// readArchive reads a directory with archive.ReadDir, a file with
// archive.Read.
func readArchive(src string, l archive.Limits) (archive.Scope, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return archive.Scope{}, err
	}
	if fi.IsDir() {
		return archive.ReadDir(src, l)
	}
	if fi.Size() > l.MaxTotalBytes {
		return archive.Scope{}, memory.Refuse(memory.ReasonTooLarge, "%d bytes, more than %d", fi.Size(), l.MaxTotalBytes)
	}
	raw, err := os.ReadFile(src) //nolint:gosec // the operator names the file to import
	if err != nil {
		return archive.Scope{}, err
	}
	return archive.Read(bytes.NewReader(raw), l)
}
