package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// runMigrate applies the migrations and exits: the step operators run once
// per deploy, before the services start.
func runMigrate(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	cfg, err := configFromEnv(TargetAll, getenv)
	if err != nil {
		return err
	}
	dbURL, err := resolveDatabase(ctx, cfg.DatabaseURL, localDatabaseURL)
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx, dbURL, newLogger(cfg)); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "migrated %s\n", store.Redact(dbURL))
	return nil
}

// runTenant creates a tenant and prints a fresh API key for it.
func runTenant(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mnemos tenant", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "display name (default: the id)")
	if len(args) == 0 || args[0] != "create" {
		return errors.New("usage: mnemos tenant create [-name NAME] ID")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 || !bus.ValidToken(fs.Arg(0)) {
		return errors.New("usage: mnemos tenant create [-name NAME] ID (ID: letters, digits, '_' and '-')")
	}
	id := fs.Arg(0)
	if *name == "" {
		*name = id
	}
	cfg, err := configFromEnv(TargetAll, getenv)
	if err != nil {
		return err
	}
	dbURL, err := resolveDatabase(ctx, cfg.DatabaseURL, localDatabaseURL)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.EnsureTenant(ctx, id, *name); err != nil {
		return err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	key := "mnm_" + base64.RawURLEncoding.EncodeToString(secret)
	if err := st.AddAPIKey(ctx, id, "created by mnemos tenant create", key); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tenant %s\napi key %s\n", id, key)
	return nil
}
