// Package observability checks the Grafana dashboard (deploy/grafana) and
// the alert rules (docs/ferry-alerts.yml) against a real cluster: every
// metric their queries name must be one the nodes export. It holds tests
// only; it must never grow code the server or the client imports.
package observability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/testwait"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// prometheusSeries are series Prometheus makes itself, not scraped from
// Ferry: the dashboard may use them.
var prometheusSeries = map[string]bool{
	"up":     true, // 1 when the last scrape of a target succeeded
	"ALERTS": true, // the alerts of the loaded rule files, firing or pending
}

// families maps each metric family a node exports to its type.
type families map[string]dto.MetricType

// exports reports whether the families hold the series name: a family of
// that name, or a histogram's _bucket, _sum or _count series, or a
// summary's _sum or _count.
func (f families) exports(name string) bool {
	if _, ok := f[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		switch f[base] {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return true
		case dto.MetricType_SUMMARY:
			return suffix != "_bucket"
		}
	}
	return false
}

// missing returns the names of used that neither the families nor
// Prometheus itself provide, each with where it is used.
func (f families) missing(used map[string][]string) []string {
	var out []string
	for name, where := range used {
		if !f.exports(name) && !prometheusSeries[name] {
			out = append(out, fmt.Sprintf("%s (used by %s)", name, strings.Join(where, "; ")))
		}
	}
	slices.Sort(out)
	return out
}

func TestFamilies_Exports(t *testing.T) {
	f := families{
		"h_seconds": dto.MetricType_HISTOGRAM, "s_seconds": dto.MetricType_SUMMARY,
		"c_total": dto.MetricType_COUNTER, "g": dto.MetricType_GAUGE,
	}
	for name, want := range map[string]bool{
		"h_seconds": true, "h_seconds_bucket": true, "h_seconds_sum": true, "h_seconds_count": true,
		"s_seconds_sum": true, "s_seconds_count": true, "s_seconds_bucket": false,
		"c_total": true, "c": false, "c_total_count": false, "g": true, "g_bucket": false, "other": false,
	} {
		if got := f.exports(name); got != want {
			t.Errorf("exports(%q) = %v, want %v", name, got, want)
		}
	}
	got := f.missing(map[string][]string{"g": {"x"}, "up": {"y"}, "nope": {"p", "q"}})
	if want := []string{"nope (used by p; q)"}; !slices.Equal(got, want) {
		t.Errorf("missing = %q, want %q", got, want)
	}
}

// TestDashboardAndAlertMetricsExported starts a three-node cluster with
// TLS and tokens, as deployed, makes it do what the dashboard shows
// (sends, receives, acks, a nack, a dead letter), scrapes every node's
// /metrics with a token that has only the metrics permission (what
// Prometheus is given), and fails naming every metric that the dashboard
// (deploy/grafana/ferry.json) or the alert rules (docs/ferry-alerts.yml)
// use and no node exports.
func TestDashboardAndAlertMetricsExported(t *testing.T) {
	used := usedMetrics(t)
	if t.Failed() {
		t.FailNow()
	}
	const adminSecret, scrapeSecret = "admin-secret", "scrape-secret"
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	for _, tok := range []auth.FileToken{
		{Name: "admin", SHA256: auth.HashSecret(adminSecret), Cluster: []string{"admin"}},
		{Name: "prometheus", SHA256: auth.HashSecret(scrapeSecret), Cluster: []string{"metrics"}},
	} {
		if err := auth.AddToFile(tokens, tok); err != nil {
			t.Fatal(err)
		}
	}
	fc := ferrytest.Start(t, ferrytest.Options{Nodes: 3, TLS: true, TokensFile: tokens, Token: adminSecret})
	exercise(t, fc)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: fc.TLSConfig()}}
	var last families
	testwait.UntilNil(t, 30*time.Second, "the scenario's events and every used metric on /metrics", func() error {
		all := families{}
		events := map[string]float64{}
		for _, addr := range fc.HTTPAddrs() {
			fams, err := scrape(hc, "https://"+addr+"/metrics", scrapeSecret)
			if err != nil {
				return err
			}
			for name, mf := range fams {
				all[name] = mf.GetType()
			}
			countEvents(fams["ferry_partition_events_total"], events)
		}
		last = all
		for _, e := range []string{"sent", "leased", "acked", "nacked", "rejected", "dead_lettered"} {
			if events[e] < 1 {
				return fmt.Errorf("no %s event reported yet (events: %v)", e, events)
			}
		}
		if m := all.missing(used); len(m) > 0 {
			return fmt.Errorf("not exported yet: %s", strings.Join(m, ", "))
		}
		return nil
	})
	t.Logf("%d metric names used by the dashboard and alert rules, all among the %d families the nodes export", len(used), len(last))
}

// exercise creates a queue and sends, receives, acks, nacks and rejects
// (dead-letters) messages on it; creates a schedule on another queue (so
// that the schedule series exist); and has a node cut a connection (a
// client with an unknown token), so that the cut-connection counter has a
// series.
func exercise(t *testing.T, fc *ferrytest.Cluster) {
	t.Helper()
	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelShort()
	if c, err := client.Dial(short, fc.Addrs(), client.WithTLS(fc.TLSConfig()), client.WithToken("not-a-token")); !errors.Is(err, client.ErrUnauthorized) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a client with an unknown token: %v, want ErrUnauthorized", err)
	}
	q := fc.CreateQueue("dashboard", client.Partitions(2), client.MaxReceives(3))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := q.Send(ctx, client.Message{ID: fmt.Sprintf("m%d", i), Group: "g", Body: []byte("work")}); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	settle := []func(*client.Delivery) error{
		func(d *client.Delivery) error { return d.Ack(ctx) },
		func(d *client.Delivery) error {
			return d.Nack(ctx, client.NackOptions{Immediate: true, Reason: "retry"})
		},
		func(d *client.Delivery) error { return d.Reject(ctx, "poison") },
	}
	for i, f := range settle {
		ds, err := q.Receive(ctx, client.ReceiveOptions{Wait: 10 * time.Second})
		if err != nil || len(ds) != 1 {
			t.Fatalf("receive %d: %d deliveries, %v", i, len(ds), err)
		}
		if err := f(ds[0]); err != nil {
			t.Fatalf("settle %d: %v", i, err)
		}
	}
	fc.CreateQueue("dashboard-cron")
	if _, err := fc.Client().CreateSchedule(ctx, "dashboard-cron", client.Schedule{Name: "hourly", Every: time.Hour}); err != nil {
		t.Fatalf("create schedule: %v", err)
	}
}

// scrape reads one node's /metrics with a bearer token.
func scrape(hc *http.Client, url, token string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return fams, nil
}

// countEvents adds the partition event counters of one node's scrape to
// events, by event label.
func countEvents(mf *dto.MetricFamily, events map[string]float64) {
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "event" {
				events[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
}
