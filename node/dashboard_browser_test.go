package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath finds a headless-capable Chromium, or "".
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// dashboardLogin signs the browser in to the admin port at base: a
// visit to / without a session lands on the sign-in form, which takes
// the token and sends the browser back to /.
func dashboardLogin(base, secret string) chromedp.Action[chromedp.Void] {
	steps := []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(base + "/"),
		chromedp.WaitVisible(`input[name="token"]`),
		chromedp.SendKeys(`input[name="token"]`, secret),
		chromedp.Submit(`input[name="token"]`),
		chromedp.WaitVisible("#partitions"),
	}
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, step := range steps {
			if _, err := step(ctx, tg); err != nil {
				return err
			}
		}
		return nil
	})
}

// browser starts a headless Chromium for the test. The returned context
// bounds the whole browser session.
func browser(t *testing.T) context.Context {
	t.Helper()
	exe := chromiumPath()
	if exe == "" {
		t.Skip("SKIPPED LOUDLY: no chromium on PATH (Debian package chromium); the dashboard was not tested in a browser")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no deadline of its own
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// screenshot saves the page as name.png under dir and logs the path.
func screenshot(t *testing.T, dir, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		buf, err := chromedp.FullScreenshot(100)(ctx, tg) // quality 100 gives a PNG
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name+".png")
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			return err
		}
		t.Logf("screenshot: %s", path)
		return nil
	})
}

// text reads the visible text of the element sel into *out.
func text(sel string, out *string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		v, err := chromedp.Text(sel)(ctx, tg)
		*out = v
		return err
	})
}

// markPage tags the current document, so that newPage can tell when a
// click's navigation has replaced it: a query run right after the click
// could otherwise match the old page, or run in a context the navigation
// destroys ("Cannot find context with specified id").
func markPage() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(document.body.dataset.stale = "1") === "1"`)(ctx, tg)
		return err
	})
}

// newPage waits, up to 20 s, until a loaded document without markPage's
// tag is in the tab. Evaluation errors while the navigation swaps the
// documents are retried.
func newPage() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		deadline := time.Now().Add(20 * time.Second)
		for {
			fresh, err := chromedp.Evaluate[bool](`document.readyState === "complete" && !!document.body && !document.body.dataset.stale`)(ctx, tg)
			if err == nil && fresh {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("no new page within 20s (last error: %v)", err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

// poll waits until the expression is true in the page.
func poll(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))(ctx, tg)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return nil
	})
}

// In a real browser: the queues page and the dead-letter page show what
// the cluster holds, the live script keeps the figures current, and a
// redrive done through the page's buttons reaches the cluster.
func TestDashboard_BrowserShowsClusterAndRedrives(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("SKIPPED LOUDLY: no chromium on PATH (Debian package chromium); the dashboard was not tested in a browser")
	}
	dc := startDashCluster(t) // before the browser takes ports of its own
	bctx := browser(t)
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()
	shots := t.TempDir()
	if dir := os.Getenv("FERRY_SCREENSHOT_DIR"); dir != "" { // to keep them after the test
		shots = dir
	}
	base := "http://" + dc.follower().HTTPAddr()
	var queues, dead, flash, live, cluster, body string
	err := chromedp.Do(ctx,
		dashboardLogin(base, dashAdminSecret),
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#partitions"),
		text("#partitions", &cluster),
		screenshot(t, shots, "1-cluster"),
		chromedp.Navigate(base+"/queues"),
		chromedp.WaitVisible(`tr[data-queue="orders"]`),
		// The script swaps in fresh figures and says when; a leader
		// elected a moment ago may need one refresh to have applied
		// every reject.
		poll(`document.getElementById("live-state").textContent.startsWith("live ·")`),
		poll(`document.querySelector('tr[data-queue="orders"] td.dead').textContent.trim() === "2"`),
		text(`tr[data-queue="orders"]`, &queues),
		text("#live-state", &live),
		screenshot(t, shots, "2-queues"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cluster, "orders") {
		t.Errorf("cluster page partitions: %q", cluster)
	}
	if fields := strings.Fields(queues); len(fields) < 6 || fields[0] != "orders" || fields[1] != "2" || fields[5] != "2" {
		t.Errorf("queues row %q: want orders, 2 partitions, 2 dead", queues)
	}
	// Open the chart page, then filter the dead letters, redrive them
	// through the confirmation and check the flash and the cluster.
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/queues/orders"),
		chromedp.WaitVisible("svg.chart"),
		screenshot(t, shots, "3-queue"),
		chromedp.Navigate(base+"/queues/orders/dead"),
		chromedp.WaitVisible("#dead"),
		chromedp.SetValue(`select[name="reason"]`, "rejected"),
		markPage(),
		chromedp.Click(`#filter button`),
		newPage(),
		chromedp.WaitVisible(`tr[data-id="o-1"]`),
		text("#dead", &dead),
		screenshot(t, shots, "4-dead"),
		markPage(),
		chromedp.Click(`tr[data-id="o-1"] a.peek`),
		newPage(),
		chromedp.WaitVisible("#body"),
		text("#body", &body),
		screenshot(t, shots, "5-peek"),
		chromedp.Navigate(base+"/queues/orders/dead?reason=rejected"),
		chromedp.WaitVisible(`tr[data-id="o-1"]`),
		chromedp.Click("#redrive"),
		chromedp.WaitVisible("#confirm"),
		screenshot(t, shots, "6-confirm"),
		markPage(),
		chromedp.Click("#confirm"),
		newPage(),
		chromedp.WaitVisible("#flash"),
		text("#flash", &flash),
		screenshot(t, shots, "7-redriven"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dead, "o-1") || !strings.Contains(dead, "o-2") || !strings.Contains(dead, "bad payload") {
		t.Errorf("dead-letter table: %q", dead)
	}
	if body != `{"order":1}` {
		t.Errorf("peeked body %q", body)
	}
	if flash != "redrove 2 dead letters" {
		t.Errorf("flash %q", flash)
	}
	if got := dc.total(t); got.Dead != 0 || got.Counters.Redriven != 2 {
		t.Errorf("after the redrive: dead %d, redriven %d; want 0 and 2", got.Dead, got.Counters.Redriven)
	}
	t.Logf("live state after refresh: %q", live)
}
