package observability

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// panel is the part of a Grafana panel the shape checks read.
type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string          `json:"refId"`
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels  []panel `json:"panels"`
	Options struct {
		Content string `json:"content"`
	} `json:"options"`
}

// dashboard is the part of the dashboard the shape checks read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	Description   string  `json:"description"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Query      json.RawMessage `json:"query"`
			Datasource json.RawMessage `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardDatasource is what every query panel and variable must name:
// the data source the $datasource variable picks.
const dashboardDatasource = `{"type":"prometheus","uid":"${datasource}"}`

// sameJSON reports whether raw holds the same JSON value as want.
func sameJSON(raw json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestDashboard_Shape checks what Grafana needs to load the dashboard and
// what keeps it useful: the schema version, the datasource, instance and
// queue variables, unique panel ids, panels inside the 24-column grid,
// every query panel on $datasource with expressions, and every alert rule
// of docs/ferry-alerts.yml named in the dashboard and its README.
func TestDashboard_Shape(t *testing.T) {
	var d dashboard
	if err := json.Unmarshal([]byte(readFile(t, dashboardPath)), &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
		t.Errorf("schemaVersion %d, want 36..41 (Grafana 9.x to 11.x)", d.SchemaVersion)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q and title %q must be set", d.UID, d.Title)
	}
	checkVariables(t, d)
	text := checkPanels(t, d.Panels)
	alerts, err := alertQueries(readFile(t, alertsPath))
	if err != nil {
		t.Fatal(err)
	}
	readme := readFile(t, dashboardDoc)
	if !strings.Contains(d.Description, "docs/ferry-alerts.yml") || !strings.Contains(readme, "docs/ferry-alerts.yml") {
		t.Errorf("the dashboard's description and %s must point at docs/ferry-alerts.yml", dashboardDoc)
	}
	for _, a := range alerts {
		name := strings.TrimPrefix(a.where, "alert ")
		if !strings.Contains(text, name) {
			t.Errorf("alert %s of %s is not named in any text panel of the dashboard", name, alertsPath)
		}
		if !strings.Contains(readme, name) {
			t.Errorf("alert %s of %s is not named in %s", name, alertsPath, dashboardDoc)
		}
	}
}

// checkVariables checks the datasource, instance and queue variables.
func checkVariables(t *testing.T, d dashboard) {
	t.Helper()
	seen := map[string]string{}
	for _, v := range d.Templating.List {
		seen[v.Name] = v.Type
		switch v.Type {
		case "datasource":
			if !sameJSON(v.Query, `"prometheus"`) {
				t.Errorf("variable %s: query %s, want \"prometheus\"", v.Name, v.Query)
			}
		case "query":
			if !sameJSON(v.Datasource, dashboardDatasource) {
				t.Errorf("variable %s: datasource %s, want %s", v.Name, v.Datasource, dashboardDatasource)
			}
		}
	}
	for name, typ := range map[string]string{"datasource": "datasource", "instance": "query", "queue": "query"} {
		if seen[name] != typ {
			t.Errorf("variable %s: type %q, want %q", name, seen[name], typ)
		}
	}
}

// checkPanels checks every panel (rows' panels too) and returns the
// content of the text panels.
func checkPanels(t *testing.T, panels []panel) string {
	t.Helper()
	ids := map[int]string{}
	var text strings.Builder
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if prev, dup := ids[p.ID]; dup || p.ID <= 0 {
				t.Errorf("%s: id must be positive and unique (also used by %s)", where, prev)
			}
			ids[p.ID] = where
			if g := p.GridPos; g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: gridPos %+v outside the 24-column grid", where, g)
			}
			switch p.Type {
			case "row":
				walk(p.Panels)
				continue
			case "text":
				text.WriteString(p.Options.Content)
				continue
			}
			if !sameJSON(p.Datasource, dashboardDatasource) {
				t.Errorf("%s: datasource %s, want %s", where, p.Datasource, dashboardDatasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no queries", where)
			}
			for _, q := range p.Targets {
				if q.RefID == "" || strings.TrimSpace(q.Expr) == "" || !sameJSON(q.Datasource, dashboardDatasource) {
					t.Errorf("%s: query %q needs a refId, an expr and the $datasource", where, q.RefID)
				}
			}
		}
	}
	walk(panels)
	return text.String()
}
