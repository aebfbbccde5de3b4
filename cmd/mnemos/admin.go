package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/store"
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
	{"tenant create [-api URL] [-name NAME] [-key KEY] ID", "create a tenant and print a new API key with every scope"},
	{"tenant list [-api URL]", "list the tenants, suspended ones marked"},
	{"tenant settings [-api URL] ID [JSON]", "print a tenant's stored and effective settings; with JSON, replace them first"},
	{"tenant upstream [-api URL] [-provider anthropic|openai] [-url URL -key-file FILE | -clear] ID", "set or clear the tenant's own upstream for a provider (default anthropic); print its URL"},
	{"tenant suspend [-api URL] ID", "refuse every key of the tenant (403 tenant_suspended) until it is resumed; its data stays"},
	{"tenant resume [-api URL] ID", "take the keys of a suspended tenant again"},
	{"tenant delete [-api URL] -yes ID", "erase the tenant for good: every row of it, its keys first; the audit log keeps the record"},
}

// runTenant manages tenants, in the database or, with -api, through the
// operator API of a running mnemos (tenantOps).
func runTenant(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "tenant", tenantUsage, map[string]subcommand{
		"create": runTenantCreate, "list": runTenantList, "settings": runTenantSettings, "upstream": runTenantUpstream,
		"suspend": runTenantSuspend(true), "resume": runTenantSuspend(false), "delete": runTenantDelete,
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

// tenantCommand parses a tenant command's arguments (its ID first, at
// most maxArgs) and opens its backend.
func tenantCommand(ctx context.Context, fs *flag.FlagSet, apiURL *string, args []string, maxArgs int, getenv func(string) string) (string, tenantOps, error) {
	if err := parseArgs(fs, args, maxArgs); err != nil {
		return "", nil, err
	}
	id, err := tenantID(fs)
	if err != nil {
		return "", nil, err
	}
	ops, err := openOps(ctx, *apiURL, getenv)
	return id, ops, err
}

func runTenantCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("tenant create", tenantUsage[0][0], "Creates the tenant ID and prints a new API key for it.", stderr)
	apiURL := apiFlag(fs)
	name := fs.String("name", "", "display name (default: the id)")
	given := fs.String("key", "", "register this API key instead of generating one (a known key for a development setup; creating again is a no-op)")
	id, ops, err := tenantCommand(ctx, fs, apiURL, args, 1, getenv)
	if err != nil {
		return err
	}
	defer ops.Close()
	key, err := ops.CreateTenant(ctx, id, *name, *given)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tenant %s\napi key %s\nkey id %s (every scope: the tenant's administrator)\n", id, key.Secret, key.Key.ID)
	return nil
}

func runTenantList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("tenant list", tenantUsage[1][0], "Lists every tenant by id: its name, when it was made, and since when it is suspended.", stderr)
	apiURL := apiFlag(fs)
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	ops, err := openOps(ctx, *apiURL, getenv)
	if err != nil {
		return err
	}
	defer ops.Close()
	tenants, err := ops.ListTenants(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCREATED\tSTATE")
	for _, t := range tenants {
		state := "active"
		if t.SuspendedAt != nil {
			state = "suspended " + t.SuspendedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.UTC().Format(time.RFC3339), state)
	}
	return tw.Flush()
}

func runTenantSettings(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("tenant settings", tenantUsage[2][0],
		"Prints the settings the tenant ID stored and the effective ones (the defaults under them).\nWith JSON, checks it and stores it in place of the stored settings first.", stderr)
	apiURL := apiFlag(fs)
	id, ops, err := tenantCommand(ctx, fs, apiURL, args, 2, getenv)
	if err != nil {
		return err
	}
	defer ops.Close()
	var doc []byte
	if fs.NArg() == 2 {
		doc = []byte(fs.Arg(1))
	}
	settings, err := ops.Settings(ctx, id, doc)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(map[string]any{"stored": settings.Stored, "effective": settings.Effective}, "", "  ")
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
	fs := commandFlags("tenant upstream", tenantUsage[3][0],
		"Sets the base URL and key the proxy sends the tenant ID's requests for a provider to: anthropic (the\n"+
			"Messages API proxy, an Anthropic-compatible upstream) or openai (the OpenAI routes, an OpenAI-compatible\n"+
			"upstream). With -clear it takes them away (the tenant uses MNEMOS_UPSTREAM_ANTHROPIC_URL or\n"+
			"MNEMOS_UPSTREAM_OPENAI_URL again); then prints the URL in use. A tenant holds one upstream per provider.", stderr)
	apiURL := apiFlag(fs)
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
	var up *store.Upstream
	if set {
		read, err := readUpstream(*url, *keyFile, os.Stdin)
		if err != nil {
			return err
		}
		up = &read
	}
	ops, err := openOps(ctx, *apiURL, getenv)
	if err != nil {
		return err
	}
	defer ops.Close()
	current, own, err := ops.Upstream(ctx, id, provider, up, *clear)
	switch {
	case err != nil:
		return err
	case !own:
		fmt.Fprintf(stdout, "tenant %s uses the process's %s upstream (%s)\n", id, provider, processUpstreamEnv[provider])
		return nil
	}
	fmt.Fprintf(stdout, "tenant %s %s upstream %s (key held, not shown)\n", id, provider, current)
	return nil
}

// processUpstreamEnv names the variable of the process's upstream for each provider.
var processUpstreamEnv = map[store.Provider]string{
	store.ProviderAnthropic: "MNEMOS_UPSTREAM_ANTHROPIC_URL",
	store.ProviderOpenAI:    "MNEMOS_UPSTREAM_OPENAI_URL",
}

// readUpstream reads an upstream's key from keyFile ("-": stdin) and
// checks it with its URL.
func readUpstream(rawURL, keyFile string, stdin io.Reader) (store.Upstream, error) {
	var key []byte
	var err error
	if keyFile == "-" {
		key, err = io.ReadAll(io.LimitReader(stdin, 64<<10))
	} else {
		key, err = os.ReadFile(keyFile) //nolint:gosec // the operator names the file
	}
	if err != nil {
		return store.Upstream{}, fmt.Errorf("tenant upstream: reading the key: %w", err)
	}
	up, err := store.NewUpstream(rawURL, string(key))
	if err != nil {
		return store.Upstream{}, fmt.Errorf("tenant upstream: %w", err)
	}
	return up, nil
}

// runTenantSuspend suspends (suspend) or resumes a tenant: while it is
// suspended every gateway process refuses its keys within a second.
func runTenantSuspend(suspend bool) subcommand {
	line, about, done := tenantUsage[4], "Suspends the tenant ID: every gateway process refuses its API keys (403 tenant_suspended)\nwithin a second, on every route, until it is resumed. Its data stays.", "suspended"
	if !suspend {
		line, about, done = tenantUsage[5], "Resumes the tenant ID: its active API keys are taken again within a second.", "resumed"
	}
	return func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
		fs := commandFlags(strings.Fields(line[0])[0]+" "+strings.Fields(line[0])[1], line[0], about, stderr)
		apiURL := apiFlag(fs)
		id, ops, err := tenantCommand(ctx, fs, apiURL, args, 1, getenv)
		if err != nil {
			return err
		}
		defer ops.Close()
		t, err := ops.SuspendTenant(ctx, id, suspend)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "tenant %s %s\n", t.ID, done)
		return nil
	}
}

// runTenantDelete erases a tenant for good (erasure.EraseTenant): in
// batches, resumable (a gateway's sweep finishes an erasure cut short),
// audited with cli as the actor (or the operator key, with -api). Against
// the database it reaches no bus: the erasure waits for a gateway to purge
// the tenant's events from the streams (erasure.ErrStreamsPending).
func runTenantDelete(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("tenant delete", tenantUsage[6][0],
		"Erases the tenant ID and every row of it, for good: its API keys first (its requests stop), then\n"+
			"every table that holds its rows, in batches, then the tenant. The audit log keeps the record.\n"+
			"Its events in the NATS streams are purged by a gateway's erasure sweep, which then removes the\n"+
			"tenant; with -api, by the mnemos that answers, at once.", stderr)
	apiURL := apiFlag(fs)
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
	ops, err := openOps(ctx, *apiURL, getenv)
	if err != nil {
		return err
	}
	defer ops.Close()
	er, err := ops.DeleteTenant(ctx, id)
	pending := errors.Is(err, erasure.ErrStreamsPending)
	if err != nil && !pending {
		return fmt.Errorf("tenant delete: %w", err)
	}
	fmt.Fprintf(stdout, "tenant %s erased: %d rows\n", id, er.Rows)
	for _, tb := range er.Tables {
		fmt.Fprintf(stdout, "  %-24s %d\n", tb.Table, tb.Rows)
	}
	if pending {
		fmt.Fprint(stdout, "its events in the NATS streams are not purged yet: a gateway's erasure sweep purges them,\n"+
			"then removes the tenant, within two minutes of a gateway running (with -api, a running mnemos does it at once)\n")
	}
	return nil
}
