package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// runHealthcheck asks this machine's mnemos whether it is ready (GET
// /readyz on the port of MNEMOS_HTTP_ADDR, or the URL given) and fails when
// it is not: a container health check for images without a shell or curl.
func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	url := ""
	switch len(args) {
	case 0:
		addr := getenv("MNEMOS_HTTP_ADDR")
		if addr == "" {
			addr = ":8080"
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("healthcheck: MNEMOS_HTTP_ADDR=%q: %w", addr, err)
		}
		url = "http://" + net.JoinHostPort("127.0.0.1", port) + "/readyz"
	case 1:
		url = args[0]
	default:
		return fmt.Errorf("usage: mnemos healthcheck [URL]")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil) //nolint:gosec // the URL is the operator's, from the command line

	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req) //nolint:gosec // the URL is the operator's, from the command line
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("healthcheck: %s answered %s: %s", url, resp.Status, body)
	}
	fmt.Fprintf(stderr, "%s: ready\n", url)
	return nil
}
