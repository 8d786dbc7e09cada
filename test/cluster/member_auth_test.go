package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// A client that presents a node certificate of the cluster CA is a
// cluster member and needs no token (the SQS endpoint beside a node
// dials this way); a client certificate of the same CA that is not a node
// certificate gives nothing, and without a token the client is refused.
func TestCluster_NodeCertificateIsAMemberClientCertificateIsNot(t *testing.T) {
	c := startCluster(t, options{})
	dialWith := func(cert tls.Certificate) (*client.Client, error) {
		cfg := c.tls.Clone()
		cfg.Certificates = []tls.Certificate{cert}
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		cl, err := client.Dial(ctx, []string{c.members[0].cfg.ClientAddr}, client.WithTLS(cfg),
			client.WithRetryBackoff(10*time.Millisecond, 250*time.Millisecond))
		if err == nil {
			t.Cleanup(func() { cl.Close() })
		}
		return cl, err
	}
	member, err := dialWith(c.members[1].cfg.TLS.Cert)
	if err != nil {
		t.Fatalf("client with a node certificate: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := member.CreateQueue(ctx, "made-by-member"); err != nil {
		t.Fatalf("a member creates a queue: %v", err)
	}
	pair, err := c.ca.Client("someone")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pair.TLS()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialWith(cert); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("client certificate without a token: %v, want ErrUnauthorized", err)
	}
}
