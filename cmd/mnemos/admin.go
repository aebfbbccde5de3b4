package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	neturl "net/url"
	"os"
	"slices"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// runMigrate applies the migrations as the schema's owner and makes the
// services' role able to log in, then exits: the step operators run once per
// deploy, before the services start.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := commandFlags("migrate", "migrate",
		"Brings the Postgres schema up to date as its owner (MNEMOS_MIGRATE_DATABASE_URL, else the local\nserver) and gives the services' role (MNEMOS_DATABASE_URL) login, then exits.", stderr)
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	cfg, err := configFromEnv(TargetAll, getenv)
	if err != nil {
		return err
	}
	if cfg.MigrateDatabaseURL == "" && cfg.DatabaseURL != "" {
		return errors.New("mnemos migrate runs as the schema's owner: set MNEMOS_MIGRATE_DATABASE_URL (MNEMOS_DATABASE_URL is the services' role, which may not migrate)")
	}
	dbs, err := resolveDatabases(ctx, cfg, localDatabaseURL)
	if err != nil {
		return err
	}
	if err := migrateSchema(ctx, dbs, newLogger(cfg)); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "migrated %s; the services connect as %s\n", store.Redact(dbs.owner), userOf(dbs.app))
	return nil
}

// tenantUsage are the tenant command's lines of mnemos's usage.
var tenantUsage = [][2]string{
	{"tenant create [-name NAME] [-key KEY] ID", "create a tenant and print a new API key with every scope"},
	{"tenant settings ID [JSON]", "print a tenant's stored and effective settings; with JSON, replace them first"},
	{"tenant upstream [-provider anthropic|openai] [-url URL -key-file FILE | -clear] ID", "set or clear the tenant's own upstream for a provider (default anthropic); print its URL"},
	{"tenant delete -yes ID", "erase the tenant for good: every row of it, its keys first; the audit log keeps the record"},
}

// runTenant manages tenants: `create` makes one and prints a fresh API key;
// `settings` prints or replaces the settings that override the defaults.
func runTenant(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "tenant", tenantUsage, map[string]subcommand{
		"create": runTenantCreate, "settings": runTenantSettings, "upstream": runTenantUpstream, "delete": runTenantDelete,
	}, args, getenv, stdout, stderr)
}

// subcommand is a command's subcommand: what runs for `mnemos COMMAND SUB`.
type subcommand func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// runSubcommand runs the subcommand of command named by args[0], or prints
// the command's usage and says what it wants.
func runSubcommand(ctx context.Context, command string, usage [][2]string, subs map[string]subcommand, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	if run := subs[sub]; run != nil {
		return run(ctx, args[1:], getenv, stdout, stderr)
	}
	fmt.Fprintln(stderr, "Usage:")
	var names []string
	for _, line := range usage {
		fmt.Fprintf(stderr, "  mnemos %s\n      %s\n", line[0], line[1])
		names = append(names, strings.Fields(line[0])[1])
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	switch sub {
	case "-h", "-help", "--help":
		return flag.ErrHelp
	case "":
		return fmt.Errorf("%s: want %s", command, want)
	}
	return fmt.Errorf("unknown %s command %q: want %s", command, sub, want)
}

// tenantID is a tenant command's ID argument.
func tenantID(fs *flag.FlagSet) (string, error) {
	id := fs.Arg(0)
	if id == "" || !bus.ValidToken(id) {
		fs.Usage()
		return "", fmt.Errorf("%s: want a tenant ID of letters, digits, '_' and '-'", fs.Name())
	}
	return id, nil
}

// tenantStore opens the services' database for a tenant command.
func tenantStore(ctx context.Context, getenv func(string) string) (*store.Store, error) {
	cfg, err := configFromEnv(TargetAll, getenv)
	if err != nil {
		return nil, err
	}
	dbs, err := resolveDatabases(ctx, cfg, localDatabaseURL)
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, store.Config{URL: dbs.app, MaxConns: 2})
}

func runTenantCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("tenant create", tenantUsage[0][0], "Creates the tenant ID and prints a new API key for it.", stderr)
	name := fs.String("name", "", "display name (default: the id)")
	given := fs.String("key", "", "register this API key instead of generating one (a known key for a development setup; creating again is a no-op)")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	id, err := tenantID(fs)
	if err != nil {
		return err
	}
	st, err := tenantStore(ctx, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.EnsureTenant(ctx, id, cmp.Or(*name, id)); err != nil {
		return err
	}
	key, secret, err := st.CreateAPIKey(ctx, id, store.NewAPIKey{Name: "created by mnemos tenant create", Scopes: store.Scopes, Secret: *given}, cliActor)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tenant %s\napi key %s\nkey id %s (every scope: the tenant's administrator)\n", id, secret, key.ID)
	return nil
}

func runTenantSettings(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("tenant settings", tenantUsage[1][0],
		"Prints the settings the tenant ID stored and the effective ones (the defaults under them).\nWith JSON, checks it and stores it in place of the stored settings first.", stderr)
	if err := parseArgs(fs, args, 2); err != nil {
		return err
	}
	id, err := tenantID(fs)
	if err != nil {
		return err
	}
	st, err := tenantStore(ctx, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	defaults := tenantcfg.Defaults()
	if fs.NArg() == 2 {
		doc := []byte(fs.Arg(1))
		if _, err := tenantcfg.Overlay(defaults, doc); err != nil {
			return err
		}
		if err := st.SetTenantSettings(ctx, id, doc); err != nil {
			return err
		}
	}
	doc, err := st.TenantSettings(ctx, id)
	if err != nil {
		return err
	}
	effective, err := tenantcfg.Overlay(defaults, doc)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(map[string]any{"stored": json.RawMessage(doc), "effective": effective}, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(out))
	return nil
}

// runTenantUpstream sets, clears or shows a tenant's own upstream for one
// provider (-provider, anthropic unless named). The key is read from a file
// (or stdin), never from the command line, where other users of the machine
// and shell histories would see it, and it is never printed.
func runTenantUpstream(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("tenant upstream", tenantUsage[2][0],
		"Sets the base URL and key the proxy sends the tenant ID's requests for a provider to: anthropic (the\n"+
			"Messages API proxy, an Anthropic-compatible upstream) or openai (the OpenAI routes, an OpenAI-compatible\n"+
			"upstream). With -clear it takes them away (the tenant uses MNEMOS_UPSTREAM_ANTHROPIC_URL or\n"+
			"MNEMOS_UPSTREAM_OPENAI_URL again); then prints the URL in use. A tenant holds one upstream per provider.", stderr)
	providerName := fs.String("provider", string(store.ProviderAnthropic), "the upstream's provider: anthropic or openai")
	url := fs.String("url", "", "the upstream's base URL, e.g. https://api.anthropic.com or https://api.openai.com")
	keyFile := fs.String("key-file", "", "a file holding the upstream's API key ('-': standard input)")
	clear := fs.Bool("clear", false, "take the tenant's own upstream for the provider away")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	id, err := tenantID(fs)
	if err != nil {
		return err
	}
	provider, err := store.ParseProvider(*providerName)
	if err != nil {
		return fmt.Errorf("tenant upstream: -provider: %w", err)
	}
	set := *url != "" || *keyFile != ""
	switch {
	case set && *clear:
		return errors.New("tenant upstream: -clear takes no -url or -key-file")
	case set && (*url == "" || *keyFile == ""):
		return errors.New("tenant upstream: give both -url and -key-file")
	}
	var up store.Upstream
	if set {
		if up, err = readUpstream(*url, *keyFile, os.Stdin); err != nil {
			return err
		}
	}
	st, err := tenantStore(ctx, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	switch {
	case set:
		if err := st.SetTenantUpstream(ctx, id, provider, up); err != nil {
			return err
		}
	case *clear:
		if _, err := st.DeleteTenantUpstream(ctx, id, provider); err != nil {
			return err
		}
	}
	current, err := st.TenantUpstream(ctx, id, provider)
	switch {
	case errors.Is(err, store.ErrNotFound):
		fmt.Fprintf(stdout, "tenant %s uses the process's %s upstream (%s)\n", id, provider, processUpstreamEnv[provider])
		return nil
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "tenant %s %s upstream %s (key held, not shown)\n", id, provider, current.URL)
	return nil
}

// processUpstreamEnv names the variable of the process's upstream for each provider.
var processUpstreamEnv = map[store.Provider]string{
	store.ProviderAnthropic: "MNEMOS_UPSTREAM_ANTHROPIC_URL",
	store.ProviderOpenAI:    "MNEMOS_UPSTREAM_OPENAI_URL",
}

// readUpstream checks an upstream's URL and reads its key from keyFile
// ("-": stdin).
func readUpstream(rawURL, keyFile string, stdin io.Reader) (store.Upstream, error) {
	u, err := neturl.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return store.Upstream{}, fmt.Errorf("tenant upstream: -url %q: want an http or https base URL", rawURL)
	}
	var key []byte
	if keyFile == "-" {
		key, err = io.ReadAll(io.LimitReader(stdin, 64<<10))
	} else {
		key, err = os.ReadFile(keyFile) //nolint:gosec // the operator names the file
	}
	if err != nil {
		return store.Upstream{}, fmt.Errorf("tenant upstream: reading the key: %w", err)
	}
	k := strings.TrimSpace(string(key))
	if k == "" || strings.ContainsAny(k, " \t\r\n") {
		return store.Upstream{}, errors.New("tenant upstream: the key file must hold one key")
	}
	return store.Upstream{URL: strings.TrimSuffix(u.String(), "/"), Key: k}, nil
}

// runTenantDelete erases a tenant for good (erasure.EraseTenant): in
// batches, resumable (a gateway's sweep finishes an erasure cut short),
// audited with cli as the actor.
func runTenantDelete(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("tenant delete", tenantUsage[3][0],
		"Erases the tenant ID and every row of it, for good: its API keys first (its requests stop), then\n"+
			"every table that holds its rows, in batches, then the tenant. The audit log keeps the record.", stderr)
	yes := fs.Bool("yes", false, "erase it: nothing is erased without")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	id, err := tenantID(fs)
	if err != nil {
		return err
	}
	if !*yes {
		return fmt.Errorf("tenant delete: this erases every row of tenant %s for good; give -yes to do it", id)
	}
	st, err := tenantStore(ctx, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	er, err := erasure.New(erasure.DefaultConfig(), st, nil).EraseTenant(ctx, id, cliActor)
	if err != nil {
		return fmt.Errorf("tenant delete: %w", err)
	}
	fmt.Fprintf(stdout, "tenant %s erased: %d rows\n", id, er.Rows())
	tables := slices.Sorted(maps.Keys(er.Deleted))
	for _, tb := range tables {
		fmt.Fprintf(stdout, "  %-24s %d\n", tb, er.Deleted[tb])
	}
	return nil
}
