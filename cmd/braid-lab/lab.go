package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/bench"
	"github.com/braid-vpn/braid/lab/mesh"
	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/scenarios"
	"github.com/braid-vpn/braid/lab/table"
	"github.com/braid-vpn/braid/lab/testbed"
)

func newLabCmd() *cobra.Command {
	lab := &cobra.Command{
		Use:   "lab",
		Short: "The multipath testbed and its workload",
	}
	lab.AddCommand(newLabServeCmd(), newLabFetchCmd(), newLabRunCmd(), newLabDemoCmd(), newLabMergeCmd(), newLabReportCmd(), newLabBenchCmd(), newLabMeshCmd())
	lab.AddCommand(newLabLoadCmd(), newLabFleetCmd())
	return lab
}

func newLabServeCmd() *cobra.Command {
	var addr, cc string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve /bytes/N (N bytes) over HTTP until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := httpbench.Listen(addr, cc)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: httpbench.Handler(), ReadHeaderTimeout: 10 * time.Second}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			context.AfterFunc(ctx, func() { srv.Close() })
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "0.0.0.0:8080", "listen address")
	cmd.Flags().StringVar(&cc, "cc", "cubic", `TCP congestion control of the served connections ("" = system default)`)
	return cmd
}

func newLabFetchCmd() *cobra.Command {
	var cc string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "fetch URL",
		Short: "Download URL, print the goodput in Mbit/s (size ÷ time, as wget reports)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := httpbench.Fetch(ctx, args[0], httpbench.Options{CC: cc})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%.2f Mbit/s (%d bytes in %.3f s, longest stall %v)\n",
				res.GoodputMbps(), res.Bytes, res.Duration.Seconds(), res.MaxStall.Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVar(&cc, "cc", "cubic", `TCP congestion control ("" = system default)`)
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
	return cmd
}

// labOut are the flags of every command that makes a report (--force: the
// drivers only).
type labOut struct {
	out         string
	json, force bool
}

func (o *labOut) register(cmd *cobra.Command, files string, driver bool) {
	cmd.Flags().StringVar(&o.out, "out", "", "directory for "+files)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the results as one JSON document on stdout")
	if driver {
		cmd.Flags().BoolVar(&o.force, "force", false, "run even when another lab run is active on this machine (the report then says so)")
	}
}

// drive is how every driver runs: --out is made first, so that a bad one
// fails before the run rather than after it; then the lab lock, whose
// warning run records; then run, cancelled by Ctrl-C, SIGTERM or the first
// progress line that cannot be written; then finish (unless the report is
// nil). With SIGPIPE ignored, `braid lab … | head` makes a closed stdout or
// stderr a write error instead of death before the namespaces are removed.
// (Not signal.Notify: that would also report every EPIPE of the lab's own
// sockets, such as the web server's when a competing download stops.)
func (o *labOut) drive(cmd *cobra.Command, run func(ctx context.Context, progress io.Writer, warning string) (*report.Doc, func(io.Writer), error)) error {
	if o.out != "" {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return err
		}
	}
	release, warning, err := lockLab(cmd.ErrOrStderr(), o.force)
	if err != nil {
		return err
	}
	defer release()
	ctx, stopSignals := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	progress := writerFunc(func(b []byte) (int, error) {
		n, err := cmd.ErrOrStderr().Write(b)
		if err != nil {
			cancel(fmt.Errorf("writing progress: %w", err))
		}
		return n, err
	})
	doc, text, runErr := run(ctx, progress, warning)
	if doc == nil {
		return runErr
	}
	if err := o.finish(cmd, doc, text); err != nil {
		return err
	}
	return runErr
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// finish writes the report into --out (when given) and prints it: JSON,
// the command's text or the document's own.
func (o *labOut) finish(cmd *cobra.Command, doc *report.Doc, text func(io.Writer)) error {
	if o.out != "" {
		if _, err := doc.Write(o.out); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "report written to %s\n", o.out)
	}
	w := cmd.OutOrStdout()
	switch {
	case o.json:
		return writeJSON(w, doc.JSON)
	case text != nil:
		text(w)
	default:
		doc.WriteText(w)
	}
	return nil
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// labLockPath is the machine's lab lock; tests point it elsewhere.
var labLockPath = runner.DefaultLockPath

// lockLab takes the machine's lab lock for the command being run, so that
// two lab runs do not share the CPUs unknowingly. Another live run is an
// error unless force; then the run goes on and warning says what it ran
// beside (also printed to stderr). release lets the lock go.
func lockLab(stderr io.Writer, force bool) (release func(), warning string, err error) {
	lock, err := runner.AcquireLock(labLockPath(), strings.Join(os.Args, " "))
	if err == nil {
		return func() { lock.Release() }, "", nil
	}
	if !force {
		return nil, "", err
	}
	if busy, ok := errors.AsType[*runner.BusyError](err); ok {
		warning = fmt.Sprintf("started with --force while another lab run was active on the machine (pid %d: %s): the two shared the CPUs", busy.PID, busy.Command)
	} else {
		warning = fmt.Sprintf("started with --force without the lab lock (%v): another lab run may have shared the CPUs", err)
	}
	fmt.Fprintf(stderr, "braid: warning: %s\n", warning)
	return func() {}, warning, nil
}

// labBraidCommand is how the drivers start the braid daemons; tests replace
// it so that the test binary plays braid.
var labBraidCommand = func() runner.BraidCommand { return runner.BraidCommand{} }

func newLabRunCmd() *cobra.Command {
	return labRunCmd(&cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario file's experiments on an emulated testbed (root)",
		Args:  cobra.ExactArgs(1),
	}, "", func(args []string) (*scenario.Scenario, error) { return scenario.Load(args[0]) })
}

func newLabDemoCmd() *cobra.Command {
	return labRunCmd(&cobra.Command{
		Use:   "demo",
		Short: "Run the demo scenario: one path vs kernel MPTCP vs braid on paths with unequal delays (root)",
		Args:  cobra.NoArgs,
	}, "braid-demo", func([]string) (*scenario.Scenario, error) {
		data, err := scenarios.Read("demo.toml")
		if err != nil {
			return nil, err
		}
		return scenario.Parse("demo.toml", data)
	})
}

// labRunCmd makes cmd (lab run or demo) run the scenario load reads, with
// outDef the directory --out "" stands for.
func labRunCmd(cmd *cobra.Command, outDef string, load func(args []string) (*scenario.Scenario, error)) *cobra.Command {
	var (
		o                labOut
		reps             int
		size, emu, shard string
		only             []string
		seed             uint64
	)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		s, err := load(args)
		if err != nil {
			return err
		}
		if os.Geteuid() != 0 {
			return runner.ErrNotRoot
		}
		stderr := cmd.ErrOrStderr()
		opt := runner.Options{Reps: reps, Braid: labBraidCommand(), Emulator: emu, Command: os.Args,
			Warn: func(msg string) { fmt.Fprintf(stderr, "braid: warning: %s\n", msg) }}
		if opt.Only, err = s.Select(only); err != nil {
			return err
		}
		if shard != "" {
			if opt.Shard, err = scenario.ParseShard(shard); err != nil {
				return err
			}
		}
		if cmd.Flags().Changed("seed") && seed == 0 {
			return errors.New("--seed: 0 is not a seed (leave --seed out for a random one)")
		}
		if size != "" {
			if opt.Size, err = scenario.ParseSize(size); err != nil {
				return fmt.Errorf("--size: %w", err)
			}
		}
		if reps < 0 || reps > scenario.MaxReps {
			return fmt.Errorf("--reps: %d is outside 1..%d", reps, scenario.MaxReps)
		}
		o.out = cmp.Or(o.out, outDef)
		return o.drive(cmd, func(ctx context.Context, progress io.Writer, warning string) (*report.Doc, func(io.Writer), error) {
			opt.Seed = cmp.Or(seed, s.Experiment.Seed, runner.NewSeed())
			where := ""
			if !opt.Shard.Whole() {
				where = ", shard " + opt.Shard.String()
			}
			fmt.Fprintf(stderr, "%s: seed %d%s (repeat with --seed %d)\n", s.Name, opt.Seed, where, opt.Seed)
			opt.Progress, opt.Terminal = progress, isTerminal(stderr)
			run, err := runner.Run(ctx, s, opt)
			if errors.Is(err, context.Canceled) && run != nil {
				err = fmt.Errorf("interrupted after %d of %d points; the testbed was removed", len(run.Points), len(opt.Shard.Filter(opt.Only.Points(s))))
			}
			if run == nil || (err != nil && len(run.Points) == 0) {
				return nil, nil, err
			}
			if warning != "" {
				run.Warnings = append(run.Warnings, warning)
			}
			return report.Document(run), labTable(run), err
		})
	}
	f := cmd.Flags()
	f.IntVar(&reps, "reps", 0, "downloads per point (default: the scenario's)")
	f.StringVar(&size, "size", "", `download size, e.g. "16MiB" or "16MB" (default: the scenario's)`)
	f.StringVar(&emu, "emulator", testbed.EmulatorAuto, "link emulator: userspace, netem (the kernel's, where it exists) or auto")
	f.StringArrayVar(&only, "only", nil, `run only the points whose AXIS takes one of the VALUEs, e.g. --only rtt=10ms,100ms --only "loss=random 1%" (repeatable)`)
	f.Uint64Var(&seed, "seed", 0, "campaign seed of the emulators' loss and jitter, ≥ 1 (default: the scenario's experiment.seed, else random; printed and recorded)")
	f.StringVar(&shard, "shard", "", `run only shard I of N: the points whose index is I mod N, e.g. "0/4" (merge the shards with lab merge)`)
	o.register(cmd, "results.json, samples.csv, summary.csv, report.md and plots (PNG, SVG)", true)
	f.Lookup("out").DefValue = outDef
	return cmd
}

func newLabMergeCmd() *cobra.Command {
	var o labOut
	cmd := &cobra.Command{
		Use:   "merge RESULTS...",
		Short: "Merge the shards of a campaign (lab run --shard I/N) into one report",
		Long: `merge reads the results.json of every shard (a file or the --out directory of
a lab run --shard I/N) and joins them into one run, as if made in one go. See
docs/lab.md ("Shards").`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var runs []*results.Run
			for _, a := range args {
				r, err := results.Read(a)
				if err != nil {
					return err
				}
				runs = append(runs, r)
			}
			run, err := results.Merge(runs)
			if err != nil {
				return err
			}
			run.Command = os.Args
			return o.finish(cmd, report.Document(run), labTable(run))
		},
	}
	o.register(cmd, "the merged results.json, samples.csv, summary.csv, report.md and plots", false)
	return cmd
}

func newLabReportCmd() *cobra.Command {
	var o labOut
	var write bool
	cmd := &cobra.Command{
		Use:   "report RESULTS",
		Short: "Write the report of a lab run, bench or mesh again from its results.json",
		Long: `report reads the results.json of a lab run, merge, bench or mesh (a file or its
directory) and prints its tables; with --write it writes the report again beside
it, with --out DIR into DIR with a copy of the results. The stored results.json
is never rewritten.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, text, err := readLabResults(args[0])
			if err != nil {
				return err
			}
			if write && o.out == "" {
				o.out = args[0]
				if fi, err := os.Stat(o.out); err != nil || !fi.IsDir() {
					o.out = filepath.Dir(o.out)
				}
				doc.JSON = nil
			}
			return o.finish(cmd, doc, text)
		},
	}
	cmd.Flags().BoolVar(&write, "write", false, "write the report files beside the results")
	cmd.Flags().StringVar(&o.out, "out", "", "directory for a copy of results.json and the report files")
	return cmd
}

// readLabResults reads the results.json of a campaign, a bench or a mesh
// run (a file or the directory holding it) as its report and, for a
// campaign, its table. Each driver's schema has a key the others lack, so
// no file says which.
func readLabResults(path string) (*report.Doc, func(io.Writer), error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, report.FileJSON)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case keys["points"] != nil:
		r, err := results.Read(path)
		if err != nil {
			return nil, nil, err
		}
		return report.Document(r), labTable(r), nil
	case keys["ratios"] != nil:
		var r bench.Report
		err := json.Unmarshal(data, &r)
		return r.Document(), nil, err
	case keys["runs"] != nil:
		var r mesh.Result
		err := json.Unmarshal(data, &r)
		return r.Document(), nil, err
	}
	return nil, nil, fmt.Errorf("%s: not the results of lab run, bench or mesh", path)
}

// labTable writes a run's table, one row per point.
func labTable(run *results.Run) func(io.Writer) {
	return func(w io.Writer) {
		axes := slices.DeleteFunc(slices.Clone(run.Axes), func(a string) bool { return a == string(scenario.AxisTransport) })
		rows := [][]string{append(slices.Clone(axes), "transport", "goodput Mbit/s", "95% CI", "n", "path shares")}
		for _, p := range run.Points {
			var row []string
			for _, a := range axes {
				q, _ := p.Param(a)
				row = append(row, q.Text)
			}
			g := p.Goodput
			row = append(row, p.Label, labNum.Num(g.Mean, 2), "± "+labNum.Num(g.CI95, 2), fmt.Sprint(g.N), fmtShares(p.PathShares))
			if p.Error != "" {
				row = append(row, "error: "+p.Error)
			}
			rows = append(rows, row)
		}
		table.WriteText(w, rows)
		fmt.Fprintf(w, "%s: %d downloads of %s per point, %s emulator, seed %d", run.Scenario, run.Reps, scenario.FormatSize(run.Size), run.Emulator, run.Seed)
		if run.Shard != "" {
			fmt.Fprintf(w, ", shard %s", run.Shard)
		}
		fmt.Fprintln(w)
		for _, warn := range run.Warnings {
			fmt.Fprintf(w, "WARNING: %s\n", warn)
		}
	}
}

// labNum is how the run's table writes a number it has not got.
var labNum = table.Style{NaN: "—"}

func fmtShares(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*m[k]))
	}
	return strings.Join(parts, " ")
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
