package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// operatorKeyUsage are the operator-key command's lines of mnemos's usage.
var operatorKeyUsage = [][2]string{
	{"operator-key create -name NAME", "make a key of the operator API (/admin/v1) and print its secret, once"},
	{"operator-key list", "list the operator keys, without secrets"},
	{"operator-key revoke ID", "revoke an operator key: the operator API refuses it at once"},
}

// runOperatorKey manages the operator API's keys, in the database only:
// the first one cannot be made through the API it opens.
func runOperatorKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "operator-key", operatorKeyUsage, map[string]subcommand{
		"create": runOperatorKeyCreate, "list": runOperatorKeyList, "revoke": runOperatorKeyRevoke,
	}, args, getenv, stdout, stderr)
}

func runOperatorKeyCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("operator-key create", operatorKeyUsage[0][0],
		"Makes a key of the operator API, which acts on every tenant, and prints it once: only its hash is\nstored. Send it as 'Authorization: Bearer <key>' to /admin/v1 on the admin listener, or set\n"+operatorKeyEnv+" for the tenant and key commands' -api.", stderr)
	name := fs.String("name", "", "who or what the key is for (required), shown when keys are listed")
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	if *name == "" {
		fs.Usage()
		return errors.New("operator-key create: want -name")
	}
	st, err := tenantStore(ctx, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	key, secret, err := st.CreateOperatorKey(ctx, *name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "operator key %s (%s)\nsecret %s\n", key.ID, key.Name, secret)
	return nil
}

func runOperatorKeyList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("operator-key list", operatorKeyUsage[1][0], "Lists the operator keys, oldest first, revoked ones too.", stderr)
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	st, err := tenantStore(ctx, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := st.OperatorKeys(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tCREATED\tLAST USED\tSTATE")
	for _, k := range keys {
		used, state := "never", "active"
		if k.LastUsedAt != nil {
			used = k.LastUsedAt.UTC().Format(time.RFC3339)
		}
		if k.RevokedAt != nil {
			state = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Name, k.CreatedAt.UTC().Format(time.RFC3339), used, state)
	}
	return tw.Flush()
}

func runOperatorKeyRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("operator-key revoke", operatorKeyUsage[2][0], "Revokes the operator key ID: the operator API checks keys at every request, so it is refused at once.", stderr)
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	id := fs.Arg(0)
	if id == "" {
		fs.Usage()
		return errors.New("operator-key revoke: want an ID (mnemos operator-key list names them)")
	}
	st, err := tenantStore(ctx, getenv)
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := st.RevokeOperatorKey(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("operator-key revoke: no operator key %s", id)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "operator key %s revoked at %s\n", key.ID, key.RevokedAt.UTC().Format(time.RFC3339))
	return nil
}
