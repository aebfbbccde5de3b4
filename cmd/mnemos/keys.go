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

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// keyUsage are the key command's lines of mnemos's usage.
var keyUsage = [][2]string{
	{"key create [-api URL] [-name NAME] [-scopes LIST] [-expires DURATION] TENANT", "make an API key of TENANT and print its secret, once"},
	{"key list [-api URL] TENANT", "list TENANT's API keys, without secrets"},
	{"key revoke [-api URL] TENANT KEY_ID", "revoke a key: every gateway refuses it within a second"},
	{"key rotate [-api URL] [-overlap DURATION] TENANT KEY_ID", "make a key in place of KEY_ID, which stays good for the overlap"},
}

// runKey manages a tenant's API keys in the database, or with -api through
// the operator API, as the API's /v1/keys does for a tenant administrator;
// the audit log names the command line (or the operator key) as the actor.
func runKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "key", keyUsage, map[string]subcommand{
		"create": runKeyCreate, "list": runKeyList, "revoke": runKeyRevoke, "rotate": runKeyRotate,
	}, args, getenv, stdout, stderr)
}

// cliActor is who the audit log says acted, for the command line.
const cliActor = "cli"

func runKeyCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("key create", keyUsage[0][0], "Makes an API key of TENANT and prints it once: only its hash is stored.", stderr)
	apiURL := apiFlag(fs)
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
	req := api.KeyRequest{Name: *name, Scopes: splitScopes(*scopes)}
	switch {
	case *expires < 0:
		return errors.New("key create: -expires must be positive")
	case *expires > 0:
		at := time.Now().Add(*expires)
		req.ExpiresAt = &at
	}
	if err := store.CheckScopes(req.Scopes); err != nil {
		return fmt.Errorf("key create: -scopes: %w", err)
	}
	ops, err := openOps(ctx, *apiURL, getenv)
	if err != nil {
		return err
	}
	defer ops.Close()
	key, err := ops.CreateKey(ctx, tenant, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key %s of tenant %s, scopes %s%s\nsecret %s\n", key.Key.ID, tenant, strings.Join(key.Key.Scopes, ","), expiry(key.Key), key.Secret)
	return nil
}

func runKeyList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("key list", keyUsage[1][0], "Lists TENANT's API keys, oldest first, revoked and expired ones too.", stderr)
	apiURL := apiFlag(fs)
	tenant, ops, err := tenantCommand(ctx, fs, apiURL, args, 1, getenv)
	if err != nil {
		return err
	}
	defer ops.Close()
	keys, err := ops.ListKeys(ctx, tenant)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tSCOPES\tCREATED\tLAST USED\tSTATE")
	for _, k := range keys {
		state := "active" + expiry(k)
		switch {
		case k.RevokedAt != nil:
			state = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
		case !k.Active:
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
	apiURL := apiFlag(fs)
	tenant, id, ops, err := keyOfTenant(ctx, fs, apiURL, args, getenv)
	if err != nil {
		return err
	}
	defer ops.Close()
	key, err := ops.RevokeKey(ctx, tenant, id)
	if isNotFound(err) {
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
	apiURL := apiFlag(fs)
	overlap := fs.Duration("overlap", 24*time.Hour, "how long the old key stays good (0: it stops at once)")
	tenant, id, ops, err := keyOfTenant(ctx, fs, apiURL, args, getenv)
	if err != nil {
		return err
	}
	defer ops.Close()
	key, err := ops.RotateKey(ctx, tenant, id, *overlap)
	switch {
	case isNotFound(err):
		return fmt.Errorf("key rotate: tenant %s has no key %s", tenant, id)
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "key %s of tenant %s, scopes %s, in place of %s%s\nsecret %s\n", key.Key.ID, tenant, strings.Join(key.Key.Scopes, ","), key.Previous.ID, expiry(*key.Previous), key.Secret)
	return nil
}

// keyOfTenant reads a key command's TENANT and KEY_ID arguments and opens
// its backend.
func keyOfTenant(ctx context.Context, fs *flag.FlagSet, apiURL *string, args []string, getenv func(string) string) (tenant, id string, ops tenantOps, err error) {
	if err = parseArgs(fs, args, 2); err != nil {
		return "", "", nil, err
	}
	if tenant, err = tenantID(fs); err != nil {
		return "", "", nil, err
	}
	if id = fs.Arg(1); id == "" {
		fs.Usage()
		return "", "", nil, fmt.Errorf("%s: want a KEY_ID (mnemos key list names them)", fs.Name())
	}
	ops, err = openOps(ctx, *apiURL, getenv)
	return tenant, id, ops, err
}

// isNotFound reports whether err says a key was not found, by the
// database or by the operator API.
func isNotFound(err error) bool {
	return errors.Is(err, store.ErrNotFound) || client.IsNotFound(err)
}

// expiry says when a key expires, if it does.
func expiry(k api.Key) string {
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
