package dashboard

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// The find page, the dead letters and a dead letter's page show each
// message's priority.
func TestDashboard_ShowsPriorities(t *testing.T) {
	srv, q := newTestServer(t)
	q.mu.Lock()
	q.dead = append(q.dead, client.DeadLetter{Partition: 0, Seq: 8, ID: "urgent-8", Reason: client.DeadRejected,
		DeadAt: time.Now(), Priority: 6, Body: []byte("b")})
	q.mu.Unlock()
	fakeMessages.mu.Lock()
	fakeMessages.byID[q] = []client.MessageInfo{{Partition: 0, Seq: 5, ID: "urgent-5", State: "ready", Priority: 7}}
	fakeMessages.mu.Unlock()
	hc := &http.Client{Jar: newJar(t)}
	if code, body := get(t, hc, srv.URL+"/queues/jobs/messages?id=urgent-5"); code != http.StatusOK ||
		!strings.Contains(body, `<th>priority</th>`) || !strings.Contains(body, `<td class="num">7</td><td class="state">ready`) {
		t.Fatalf("find page %d:\n%s", code, body)
	}
	if code, body := get(t, hc, srv.URL+"/queues/jobs/dead"); code != http.StatusOK ||
		!strings.Contains(body, `<th>priority</th>`) || !strings.Contains(body, `<td class="num">6</td><td>rejected`) {
		t.Fatalf("dead letters page %d:\n%s", code, body)
	}
	if code, body := get(t, hc, srv.URL+"/queues/jobs/dead/0/8"); code != http.StatusOK ||
		!strings.Contains(body, `<tr><th>priority</th><td>6</td></tr>`) {
		t.Fatalf("dead letter page %d:\n%s", code, body)
	}
}
