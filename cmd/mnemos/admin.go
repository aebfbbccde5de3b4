package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/mnemos-ai/mnemos/pkg/bus"
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

// runTenant manages tenants: `create` makes one and prints a fresh API key;
// `settings` prints or replaces the settings that override the defaults.
func runTenant(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const usageText = "usage: mnemos tenant create [-name NAME] [-key KEY] ID | mnemos tenant settings ID [JSON]"
	if len(args) == 0 {
		return errors.New(usageText)
	}
	fs := flag.NewFlagSet("mnemos tenant "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "display name (default: the id)")
	given := fs.String("key", "", "register this API key instead of generating one (a known key for a development setup; creating again is a no-op)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() < 1 || !bus.ValidToken(fs.Arg(0)) {
		return fmt.Errorf("%s (ID: letters, digits, '_' and '-')", usageText)
	}
	id := fs.Arg(0)
	cfg, err := configFromEnv(TargetAll, getenv)
	if err != nil {
		return err
	}
	dbs, err := resolveDatabases(ctx, cfg, localDatabaseURL)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Config{URL: dbs.app, MaxConns: 2})
	if err != nil {
		return err
	}
	defer st.Close()

	switch args[0] {
	case "create":
		if fs.NArg() != 1 {
			return errors.New(usageText)
		}
		if *name == "" {
			*name = id
		}
		if err := st.EnsureTenant(ctx, id, *name); err != nil {
			return err
		}
		key := *given
		if key == "" {
			secret := make([]byte, 32)
			if _, err := rand.Read(secret); err != nil {
				return err
			}
			key = "mnm_" + base64.RawURLEncoding.EncodeToString(secret)
		}
		if err := st.AddAPIKey(ctx, id, "created by mnemos tenant create", key); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "tenant %s\napi key %s\n", id, key)
		return nil
	case "settings":
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
	return errors.New(usageText)
}
