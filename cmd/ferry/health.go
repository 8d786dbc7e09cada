package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"

	"github.com/spf13/cobra"
)

// healthBodyMax bounds the body of a health answer that is read.
const healthBodyMax = 4 << 10

// defaultHTTPPort is ferryd's HTTP admin port before -port-offset.
const defaultHTTPPort = 7201

// healthCmd is `ferry health`: one GET of a node's /healthz (or any URL),
// exit 0 when it answers 200 and 1 otherwise. It needs no token (/healthz
// is open) and no shell or curl, so a container built from scratch can use
// it as its health check.
func healthCmd(g *globals) *cobra.Command {
	var rawURL string
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check that a node's HTTP admin port answers /healthz (exit 0 when it does)",
		Long: "Sends one GET to --url and exits 0 when the answer is 200 OK.\n\n" +
			"Without --url it checks the node that the FERRY_* environment of ferryd describes:\n" +
			"FERRY_HTTP_ADDR, else FERRY_IP (default 127.0.0.1) with port 7201 plus FERRY_PORT_OFFSET;\n" +
			"https unless --insecure. The server's certificate is checked against --ca (FERRY_CA),\n" +
			"else FERRY_TLS_CA (ferryd's CA), else " + devCA + " when present, else the system roots.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target := rawURL
			if target == "" {
				var err error
				if target, err = defaultHealthURL(g.tls.insecure); err != nil {
					return err
				}
			}
			if err := checkHealth(cmd.Context(), g, target); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok", target)
			return nil
		},
	}
	cmd.Flags().StringVar(&rawURL, "url", "", "URL to check, e.g. https://10.0.0.11:7201/healthz (default: from ferryd's FERRY_* environment)")
	return cmd
}

// defaultHealthURL is the /healthz URL of the node that ferryd's
// environment variables describe.
func defaultHealthURL(insecure bool) (string, error) {
	scheme := "https"
	if insecure {
		scheme = "http"
	}
	if addr := os.Getenv("FERRY_HTTP_ADDR"); addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", fmt.Errorf("health: FERRY_HTTP_ADDR=%q: %w", addr, err)
		}
		return scheme + "://" + addr + "/healthz", nil
	}
	ip := os.Getenv("FERRY_IP")
	if ip == "" {
		ip = "127.0.0.1"
	}
	port := defaultHTTPPort
	if v := os.Getenv("FERRY_PORT_OFFSET"); v != "" {
		off, err := strconv.Atoi(v)
		if err != nil {
			return "", fmt.Errorf("health: FERRY_PORT_OFFSET=%q: not a number", v)
		}
		port += off
	}
	return scheme + "://" + net.JoinHostPort(ip, strconv.Itoa(port)) + "/healthz", nil
}

// checkHealth GETs target and returns nil when it answers 200 OK.
func checkHealth(ctx context.Context, g *globals, target string) error {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("health: --url %q: want an http:// or https:// URL with a host", target)
	}
	tlsFlags := g.tls
	if tlsFlags.ca == "" && !tlsFlags.insecure {
		tlsFlags.ca = os.Getenv("FERRY_TLS_CA")
	}
	tlsFlags.insecure = false // the URL's scheme decides
	tlsCfg, err := tlsFlags.config()
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: nil}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		if hint := tlsHint(err); hint != "" {
			return fmt.Errorf("health %s: %s", target, hint)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("health %s: no answer within --timeout %s", target, g.timeout)
		}
		return fmt.Errorf("health %s: %w", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, healthBodyMax))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health %s: %s: %s", target, resp.Status, truncateArg(string(body), 200))
	}
	return nil
}
