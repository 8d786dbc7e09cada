package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
)

// diagnosticPaths are what Diagnose saves of each node, by file suffix:
// the raft state of every group (with each leader's view of its
// servers) and every goroutine's stack.
var diagnosticPaths = map[string]string{
	"raft.json":      "/v1/debug/raft",
	"goroutines.txt": "/debug/pprof/goroutine?debug=2",
}

// maxDiagnosticBytes bounds one saved answer.
const maxDiagnosticBytes = 64 << 20

// Diagnose saves, for every node that is up, its raft state and its
// goroutines into the logs directory (nX.label.raft.json,
// nX.label.goroutines.txt): what a cluster that did not recover from a
// fault, or a run that ends with replicas apart or queues not drained,
// needs to be explained after the nodes are gone. It needs the nodes'
// -pprof (DefaultServerArgs) and returns the first error, having tried
// every node.
func (c *Cluster) Diagnose(ctx context.Context, label string) error {
	var first error
	for _, n := range c.Up() {
		for suffix, path := range diagnosticPaths {
			file := filepath.Join(c.Root, "logs", fmt.Sprintf("%s.%s.%s", n.ID, label, suffix))
			if err := c.saveURL(ctx, c.url(n, path), file); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// saveURL writes the answer to a GET of url into file.
func (c *Cluster) saveURL(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, io.LimitReader(resp.Body, maxDiagnosticBytes)); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", url, err)
	}
	return f.Close()
}
