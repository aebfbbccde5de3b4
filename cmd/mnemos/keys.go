package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// keyUsage are the key command's lines of mnemos's usage.
var keyUsage = [][2]string{
	{"key create [-name NAME] [-scopes LIST] [-expires DURATION] TENANT", "make an API key of TENANT and print its secret, once"},
	{"key list TENANT", "list TENANT's API keys, without secrets"},
	{"key revoke TENANT KEY_ID", "revoke a key: every gateway refuses it within a second"},
	{"key rotate [-overlap DURATION] TENANT KEY_ID", "make a key in place of KEY_ID, which stays good for the overlap"},
}

// runKey manages a tenant's API keys in the database, as the API's
// /v1/keys does for a tenant administrator; the audit log names the
// command line as the actor.
func runKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "key", keyUsage, map[string]subcommand{
		"create": runKeyCreate, "list": runKeyList, "revoke": runKeyRevoke, "rotate": runKeyRotate,
	}, args, getenv, stdout, stderr)
}

// cliActor is who the audit log says acted, for the command line.
const cliActor = "cli"

func runKeyCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("key create", keyUsage[0][0], "Makes an API key of TENANT and prints it once: only its hash is stored.", stderr)
	name := fs.String("name", "", "what the key is for, shown when keys are listed")
	scopes := fs.String("scopes", "ingest,proxy,read,memory:write", "its scopes, separated by commas: "+strings.Join(store.Scopes, ", "))
	expires := fs.Duration("expires", 0, "how long the key is good for (0: until revoked)")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	tenant, err := tenantID(fs)
	if err != nil {
		return err
	}
	k := store.NewAPIKey{Name: *name, Scopes: splitScopes(*scopes)}
	switch {
	case *expires < 0:
		return errors.New("key create: -expires must be positive")
	case *expires > 0:
		at := time.Now().Add(*expires)
		k.ExpiresAt = &at
	}
	if err := store.CheckScopes(k.Scopes); err != nil {
		return fmt.Errorf("key create: -scopes: %w", err)
	}
	st, err := tenantStore(ctx, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.TenantSettings(ctx, tenant); err != nil {
		return err // an unknown tenant
	}
	key, secret, err := st.CreateAPIKey(ctx, tenant, k, cliActor)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key %s of tenant %s, scopes %s%s\nsecret %s\n", key.ID, tenant, strings.Join(key.Scopes, ","), expiry(key), secret)
	return nil
}

func runKeyList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("key list", keyUsage[1][0], "Lists TENANT's API keys, oldest first, revoked and expired ones too.", stderr)
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	tenant, err := tenantID(fs)
	if err != nil {
		return err
	}
	st, err := tenantStore(ctx, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.APIKeys(ctx, tenant)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tSCOPES\tCREATED\tLAST USED\tSTATE")
	now := time.Now()
	for _, k := range keys {
		state := "active" + expiry(k)
		switch {
		case k.RevokedAt != nil:
			state = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
		case !k.Active(now):
			state = "expired " + k.ExpiresAt.UTC().Format(time.RFC3339)
		}
		used := "never"
		if k.LastUsedAt != nil {
			used = k.LastUsedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Name, strings.Join(k.Scopes, ","), k.CreatedAt.UTC().Format(time.RFC3339), used, state)
	}
	return tw.Flush()
}

func runKeyRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("key revoke", keyUsage[2][0], "Revokes the key KEY_ID of TENANT: every gateway process refuses it within a second,\nand console sessions signed in with it end.", stderr)
	if err := parseArgs(fs, args, 2); err != nil {
		return err
	}
	tenant, id, st, err := keyOfTenant(ctx, fs, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := st.RevokeAPIKey(ctx, tenant, id, cliActor)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("key revoke: tenant %s has no key %s", tenant, id)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key %s of tenant %s revoked at %s\n", key.ID, tenant, key.RevokedAt.UTC().Format(time.RFC3339))
	return nil
}

func runKeyRotate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("key rotate", keyUsage[3][0], "Makes a key with KEY_ID's name and scopes and prints it once; KEY_ID stays good for the overlap.", stderr)
	overlap := fs.Duration("overlap", 24*time.Hour, "how long the old key stays good (0: it stops at once)")
	if err := parseArgs(fs, args, 2); err != nil {
		return err
	}
	tenant, id, st, err := keyOfTenant(ctx, fs, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	old, key, secret, err := st.RotateAPIKey(ctx, tenant, id, *overlap, cliActor)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("key rotate: tenant %s has no key %s", tenant, id)
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "key %s of tenant %s, scopes %s, in place of %s%s\nsecret %s\n", key.ID, tenant, strings.Join(key.Scopes, ","), old.ID, expiry(old), secret)
	return nil
}

// keyOfTenant reads a key command's TENANT and KEY_ID arguments and opens
// the store.
func keyOfTenant(ctx context.Context, fs *flag.FlagSet, getenv func(string) string) (tenant, id string, st *store.Store, err error) {
	if tenant, err = tenantID(fs); err != nil {
		return "", "", nil, err
	}
	if id = fs.Arg(1); id == "" {
		fs.Usage()
		return "", "", nil, fmt.Errorf("%s: want a KEY_ID (mnemos key list names them)", fs.Name())
	}
	st, err = tenantStore(ctx, getenv)
	return tenant, id, st, err
}

// expiry says when a key expires, if it does.
func expiry(k store.APIKey) string {
	if k.ExpiresAt == nil {
		return ""
	}
	return ", expires " + k.ExpiresAt.UTC().Format(time.RFC3339)
}

func splitScopes(list string) []string {
	var out []string
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
