package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ferrymq/ferry/internal/devpki"
)

// runDevPKI is `ferryd dev-pki`: it makes sure a directory holds a
// throwaway CA, a certificate for every named node and a client
// certificate, creating only what is missing. `make run` calls it on every
// start; the CA key stays beside the certificates, so it is for local and
// test clusters only.
func runDevPKI(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ferryd dev-pki", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "data/pki", "directory of the CA and certificates")
	nodes := fs.String("nodes", "node1,node2,node3", "comma-separated node ids to issue certificates for")
	hosts := fs.String("hosts", "", "comma-separated extra IP addresses or DNS names for every node certificate "+
		"(127.0.0.1, localhost and the node id are always included)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: ferryd dev-pki [flags]\n\nWrites a throwaway CA, node certificates (<id>.pem, <id>-key.pem) and a client\n"+
			"certificate (client.pem) for a local or test cluster. Existing files are kept.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err}
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Errorf("dev-pki: unexpected argument %q (flags only)", fs.Arg(0))}
	}
	created, err := devpki.Init(*dir, splitList(*nodes), splitList(*hosts))
	if err != nil {
		return fmt.Errorf("dev-pki: %w", err)
	}
	for _, f := range created {
		fmt.Fprintln(stdout, "created", f)
	}
	return nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
