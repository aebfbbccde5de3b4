package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// runHealthcheck asks this machine's mnemos whether it is ready (GET
// /readyz on the port of MNEMOS_HTTP_ADDR, or at the URL given) and fails
// when it is not: a container health check for images without a shell or
// curl.
func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := commandFlags("healthcheck", "healthcheck [URL]",
		"Exits 0 when the mnemos at URL is ready: GET URL, or URL/readyz when it names no path\n(http://host:port). Without URL: /readyz on this machine's port of MNEMOS_HTTP_ADDR.", stderr)
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	target, err := readyURL(fs.Arg(0), getenv)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil) //nolint:gosec // the URL is the operator's, from the command line
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
		return fmt.Errorf("healthcheck: %s answered %s: %s", target, resp.Status, body)
	}
	fmt.Fprintf(stderr, "%s: ready\n", target)
	return nil
}

// readyURL is the URL a health check asks: given (http:// added to a bare
// host:port, /readyz to a URL without a path), else /readyz on the local
// port of MNEMOS_HTTP_ADDR.
func readyURL(given string, getenv func(string) string) (string, error) {
	if given == "" {
		addr := getenv("MNEMOS_HTTP_ADDR")
		if addr == "" {
			addr = ":8080"
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return "", fmt.Errorf("MNEMOS_HTTP_ADDR=%q: %w", addr, err)
		}
		return "http://" + net.JoinHostPort("127.0.0.1", port) + "/readyz", nil
	}
	if !strings.Contains(given, "://") {
		given = "http://" + given
	}
	u, err := url.Parse(given)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("URL %q: want http://host:port, or the URL to ask", given)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/readyz"
	}
	return u.String(), nil
}
