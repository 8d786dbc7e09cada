// Command ferry is the command line client of a Ferry cluster: cluster
// status, queues, sending and receiving, dead letters and a load generator.
//
// By default it talks to the local cluster that `make run` starts
// (127.0.0.1:7101-7103); -s or FERRY_SERVERS names others. Connections are
// TLS, checked against --ca (FERRY_CA), by default ./data/pki/ca.pem, the
// CA `make run` writes, when it exists; --insecure connects in plaintext.
// It presents the token of --token (FERRY_TOKEN) or --token-file
// (FERRY_TOKEN_FILE), by default ./data/pki/admin.token, the admin token
// `make run` writes, when it exists.
// Output is a human table, or JSON with --json.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/spf13/cobra"
)

// defaultServers is the cluster that `make run` starts.
const defaultServers = "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"

// globals are the flags every command shares.
type globals struct {
	servers string
	json    bool
	timeout time.Duration
	tls     tlsFlags
	token   tokenFlags
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		timeout, _ := root.PersistentFlags().GetDuration("timeout")
		fmt.Fprintln(os.Stderr, "ferry:", errorText(describe(err, timeout)))
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "ferry",
		Short:         "Command line client of a Ferry cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	servers := os.Getenv("FERRY_SERVERS")
	if servers == "" {
		servers = defaultServers
	}
	root.PersistentFlags().StringVarP(&g.servers, "servers", "s", servers, "comma-separated client addresses of cluster nodes (env FERRY_SERVERS)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON instead of tables")
	root.PersistentFlags().DurationVar(&g.timeout, "timeout", 30*time.Second, "give up after this long")
	g.tls.register(root)
	g.token.register(root)
	root.AddCommand(clusterCmd(g), queueCmd(g), sendCmd(g), recvCmd(g), peekCmd(g),
		settleCmd(g, "ack"), settleCmd(g, "nack"), settleCmd(g, "extend"), dlqCmd(g), purgeCmd(g), benchCmd(g),
		nodeCmd(g), topCmd(g), healthCmd(g), msgCmd(g), scheduleCmd(g))
	root.InitDefaultCompletionCmd()
	requireKnownSubcommands(root)
	return root
}

// connect dials the cluster and returns the client with a context bounded
// by --timeout.
func (g *globals) connect(cmd *cobra.Command) (*client.Client, context.Context, context.CancelFunc, error) {
	tlsCfg, err := g.tls.config()
	if err != nil {
		return nil, nil, nil, err
	}
	secret, err := g.token.secret()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	c, err := client.Dial(ctx, strings.Split(g.servers, ","), client.WithClientName("ferry-cli"), client.WithTLS(tlsCfg),
		client.WithToken(secret))
	if err != nil {
		cancel()
		if cmd.Context().Err() != nil {
			return nil, nil, nil, err // interrupted
		}
		if hint := tokenHint(err, secret != ""); hint != "" {
			return nil, nil, nil, fmt.Errorf("cannot connect to the cluster at %s: %s", g.servers, hint)
		}
		if hint := tlsHint(err); hint != "" {
			return nil, nil, nil, fmt.Errorf("cannot connect to the cluster at %s: %s", g.servers, hint)
		}
		if g.tls.insecure && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) {
			return nil, nil, nil, fmt.Errorf("%w; the servers closed the plaintext connection: if the cluster runs TLS, drop --insecure",
				clusterDownError(g.servers, err))
		}
		return nil, nil, nil, clusterDownError(g.servers, err)
	}
	return c, ctx, func() { c.Close(); cancel() }, nil
}

// printJSON writes v as indented JSON.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows under a header, aligned in columns.
func table(header []string, rows [][]string) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	w.Flush()
}

// since renders a time as an age ("3s ago"), or "-" for the zero time.
func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Millisecond).String() + " ago"
}
