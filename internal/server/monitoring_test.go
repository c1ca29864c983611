package server_test

// deploy/monitoring (docs/running.md, "Dashboard and alerts"): the alert
// rules and the Grafana dashboard name only series /metrics exports, and
// the dashboard is a well-formed Grafana dashboard.

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolfs/toolfs-api/internal/checkpoint"
	"github.com/toolfs/toolfs-api/internal/events"
	"github.com/toolfs/toolfs-api/internal/policy"
	"github.com/toolfs/toolfs-api/internal/server"
	"github.com/toolfs/toolfs-api/internal/server/servertest"
	"github.com/toolfs/toolfs-api/internal/tools"
)

const monitoring = "../../deploy/monitoring"

// dashboard is the part of a Grafana dashboard model the test checks.
type dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		GridPos *struct{ H, W, X, Y int } `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// exported is every series name a real server's /metrics shows after a
// write, a read and a failed read, with the change feed on (as --events
// is by default): each family's name, and
// a histogram's _bucket, _sum and _count.
func exported(t *testing.T) map[string]bool {
	srv := servertest.Start(t, server.Config{Policy: policy.Settings{Enabled: true}, Sessions: tools.SessionSettings{Default: "default"}, Checkpoints: checkpoint.Settings{Enabled: true}, Events: events.Settings{Enabled: true}})
	post := func(tool, body string) {
		resp, err := http.Post(srv.URL+"/tools/"+tool, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
	}
	post("write", `{"file_path":"a.txt","content":"x\n"}`)
	post("read", `{"file_path":"a.txt"}`)
	post("read", `{"file_path":"missing.txt"}`)
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	names := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		if f[3] == "histogram" || f[3] == "summary" {
			names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
			names[f[2]+"_bucket"] = f[3] == "histogram"
		}
	}
	return names
}

// seriesIn are the metric names an expression or rules file names: ours
// and the Go and process collectors'.
var seriesIn = regexp.MustCompile(`\b(?:toolfs|process|go)_[a-z0-9_]+\b`)

// TestMonitoringNamesExportedSeries: every series the alert rules and the
// dashboard query is one the server exports, and each of the issue's
// concerns has its alert.
func TestMonitoringNamesExportedSeries(t *testing.T) {
	names := exported(t)
	rules, err := os.ReadFile(filepath.Join(monitoring, "alerts.yaml"))
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(monitoring, "grafana-dashboard.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	used := seriesIn.FindAllString(string(rules)+"\n"+strings.Join(exprs, "\n"), -1)
	slices.Sort(used)
	used = slices.Compact(used)
	require.GreaterOrEqual(t, len(used), 10, "the files name the series they query")
	for _, n := range used {
		assert.True(t, names[n], "%s is not a series /metrics exports", n)
	}
	for _, alert := range []string{"ToolfsServerErrors", "ToolfsSlowTool", "ToolfsStaleVersionsHigh",
		"ToolfsSessionStoreErrors", "ToolfsAuditWriteErrors", "ToolfsApprovalsWaiting"} {
		assert.Contains(t, string(rules), "- alert: "+alert+"\n")
	}
}

// TestGrafanaDashboardWellFormed: the dashboard has an uid, a title and a
// schema version; a Prometheus datasource variable every panel and target
// uses; panels with unique ids, a type, a place on the grid and at least
// one query each, with unique refIds. With TOOLFS_PROMTOOL set
// (deploy/monitoring/check.sh), every query is also parsed by promtool as
// a recording rule.
func TestGrafanaDashboardWellFormed(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(monitoring, "grafana-dashboard.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	assert.Equal(t, "toolfs-api", d.UID)
	assert.NotEmpty(t, d.Title)
	assert.GreaterOrEqual(t, d.SchemaVersion, 36)
	require.NotEmpty(t, d.Templating.List)
	assert.Equal(t, "datasource", d.Templating.List[0].Name)
	assert.Equal(t, "datasource", d.Templating.List[0].Type)
	require.NotEmpty(t, d.Panels)
	ids := map[int]bool{}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for _, p := range d.Panels {
		assert.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		assert.NotEmpty(t, p.Type, p.Title)
		assert.NotEmpty(t, p.Title, "panel %d", p.ID)
		assert.Equal(t, "prometheus", p.Datasource.Type, p.Title)
		assert.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
		if assert.NotNil(t, p.GridPos, p.Title) {
			assert.True(t, p.GridPos.W > 0 && p.GridPos.H > 0 && p.GridPos.X+p.GridPos.W <= 24, p.Title)
		}
		require.NotEmpty(t, p.Targets, p.Title)
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			assert.False(t, refs[tg.RefID], "%s: refId %s twice", p.Title, tg.RefID)
			refs[tg.RefID] = true
			assert.NotEmpty(t, tg.Expr, p.Title)
			q, _ := json.Marshal(tg.Expr)
			rules.WriteString("      - record: dashboard:panel\n        expr: " + string(q) + "\n")
		}
	}
	promtool := os.Getenv("TOOLFS_PROMTOOL")
	if promtool == "" {
		t.Log("TOOLFS_PROMTOOL unset: the queries are not parsed (deploy/monitoring/check.sh sets it)")
		return
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	require.NoError(t, os.WriteFile(f, []byte(rules.String()), 0o644))
	out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput()
	require.NoError(t, err, "promtool check rules on the dashboard's queries:\n%s", out)
}
