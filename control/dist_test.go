package control

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Grafana dashboard and the alert rules shipped in dist/ name braid's
// metrics by hand; a renamed or dropped family would leave an empty panel or
// an alert that never fires, silently.
const (
	dashboardFile = "../dist/grafana/braid.json"
	rulesFile     = "../dist/prometheus/braid-rules.yml"
)

// metricRef matches a braid metric name in PromQL (not an alert name, which
// is capitalised, nor a recording rule's, which would have a colon).
var metricRef = regexp.MustCompile(`\bbraid_[a-z0-9_]+\b`)

// Every metric name the dashboard and the rules use is a family of the
// /metrics page (the recovery sample has every family, TestMetricsGolden).
func TestDistMetricNames(t *testing.T) {
	have := families(scrape(NewCollector(recoverySample)))
	for _, file := range []string{dashboardFile, rulesFile} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		used := metricRef.FindAllString(string(b), -1)
		if len(used) < 4 {
			t.Fatalf("%s names %d metrics; the pattern is wrong", file, len(used))
		}
		slices.Sort(used)
		for _, name := range slices.Compact(used) {
			if _, ok := have[name]; !ok {
				t.Errorf("%s uses %s, which braid's /metrics does not have", file, name)
			}
		}
	}
}

// dashboardExprs returns the PromQL of every panel and variable query.
func dashboardExprs(t *testing.T) []string {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

// The dashboard's queries parse: promtool checks them as recording rules,
// with Grafana's variables given values. Skipped without promtool (.ci/run
// installs it).
func TestDashboardQueriesParse(t *testing.T) {
	exprs := dashboardExprs(t)
	if len(exprs) < 20 {
		t.Fatalf("%d queries in the dashboard", len(exprs))
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	vars := strings.NewReplacer("$__rate_interval", "1m", "$peer", ".*", "$instance", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(vars.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", i, q)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}
