package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/braid-vpn/braid/httpbench"
	"github.com/braid-vpn/braid/lab/report"
	"github.com/braid-vpn/braid/lab/results"
	"github.com/braid-vpn/braid/lab/runner"
	"github.com/braid-vpn/braid/lab/scenario"
	"github.com/braid-vpn/braid/lab/scenarios"
	"github.com/braid-vpn/braid/lab/table"
	"github.com/braid-vpn/braid/lab/testbed"
)

func init() { extraCommands = append(extraCommands, newLabCmd) }

// newLabCmd is the lab's command group: the testbed runs (run, demo) and the
// measuring workload they use (a real HTTP server and client, with the TCP
// congestion control chosen per socket).
func newLabCmd() *cobra.Command {
	lab := &cobra.Command{
		Use:   "lab",
		Short: "The multipath testbed and its workload",
	}
	lab.AddCommand(newLabServeCmd(), newLabFetchCmd(), newLabRunCmd(), newLabDemoCmd(), newLabMergeCmd(), newLabReportCmd(), newLabBenchCmd(), newLabMeshCmd())
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
			go func() {
				<-ctx.Done()
				srv.Close()
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
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

// labRunFlags are the options shared by `lab run` and `lab demo`.
type labRunFlags struct {
	reps  int
	size  string
	out   string
	json  bool
	only  []string
	emu   string
	seed  uint64
	shard string
	force bool
}

func (f *labRunFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.reps, "reps", 0, "downloads per point (default: the scenario's)")
	cmd.Flags().StringVar(&f.size, "size", "", `download size, e.g. "16MiB" or "16MB" (default: the scenario's)`)
	cmd.Flags().StringVar(&f.out, "out", "", "directory for results.json, samples.csv, summary.csv, report.md and plots (PNG, SVG)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print the results as one JSON document on stdout")
	cmd.Flags().StringVar(&f.emu, "emulator", testbed.EmulatorAuto, "link emulator: userspace, netem (the kernel's, where it exists) or auto")
	cmd.Flags().StringArrayVar(&f.only, "only", nil, `run only the points whose AXIS takes one of the VALUEs, e.g. --only rtt=10ms,100ms --only "loss=random 1%" (repeatable)`)
	cmd.Flags().Uint64Var(&f.seed, "seed", 0, "campaign seed of the emulators' loss and jitter, ≥ 1 (default: the scenario's experiment.seed, else random; printed and recorded)")
	cmd.Flags().StringVar(&f.shard, "shard", "", `run only shard I of N: the points whose index is I mod N, e.g. "0/4" (merge the shards with lab merge)`)
	registerForce(cmd, &f.force)
}

// registerForce adds --force: run even when another lab run holds the lock.
func registerForce(cmd *cobra.Command, force *bool) {
	cmd.Flags().BoolVar(force, "force", false, "run even when another lab run is active on this machine (the report then says so)")
}

// labLockPath is the machine's lab lock; tests point it elsewhere.
var labLockPath = runner.DefaultLockPath

// labArgs is the command line a run records.
var labArgs = func() []string { return os.Args }

// lockLab takes the machine's lab lock for the command being run, so that
// two lab runs do not share the CPUs unknowingly. Another live run is an
// error unless force; then the run goes on and warning says what it ran
// beside (also printed to stderr). release lets the lock go.
func lockLab(stderr io.Writer, force bool) (release func(), warning string, err error) {
	lock, err := runner.AcquireLock(labLockPath(), strings.Join(labArgs(), " "))
	if err == nil {
		return func() { lock.Release() }, "", nil
	}
	if !force {
		return nil, "", err
	}
	var busy *runner.BusyError
	if errors.As(err, &busy) {
		warning = fmt.Sprintf("started with --force while another lab run was active on the machine (pid %d: %s): the two shared the CPUs", busy.PID, busy.Command)
	} else {
		warning = fmt.Sprintf("started with --force without the lab lock (%v): another lab run may have shared the CPUs", err)
	}
	fmt.Fprintf(stderr, "braid: warning: %s\n", warning)
	return func() {}, warning, nil
}

// labBraidCommand is how `lab run` starts the braid daemons; tests replace
// it so that the test binary plays braid.
var labBraidCommand = func() runner.BraidCommand { return runner.BraidCommand{} }

func newLabRunCmd() *cobra.Command {
	var f labRunFlags
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario file's experiments on an emulated testbed (root)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := scenario.Load(args[0])
			if err != nil {
				return err
			}
			return runLab(cmd, s, &f, false)
		},
	}
	f.register(cmd)
	return cmd
}

func newLabDemoCmd() *cobra.Command {
	var f labRunFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the demo scenario: one path vs kernel MPTCP vs braid on paths with unequal delays (root)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := scenarios.Read("demo.toml")
			if err != nil {
				return err
			}
			s, err := scenario.Parse("demo.toml", data)
			if err != nil {
				return err
			}
			if f.out == "" {
				f.out = "braid-demo"
			}
			return runLab(cmd, s, &f, true)
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("out").DefValue = "braid-demo"
	return cmd
}

func runLab(cmd *cobra.Command, s *scenario.Scenario, f *labRunFlags, demo bool) error {
	if os.Geteuid() != 0 {
		return runner.ErrNotRoot
	}
	stderr := cmd.ErrOrStderr()
	opt := runner.Options{Reps: f.reps, Braid: labBraidCommand(), Emulator: f.emu, Command: labArgs(),
		Warn: func(msg string) { fmt.Fprintf(stderr, "braid: warning: %s\n", msg) }}
	only, err := s.Select(f.only)
	if err != nil {
		return err
	}
	if len(f.only) > 0 {
		opt.Only = only
	}
	if f.shard != "" {
		if opt.Shard, err = scenario.ParseShard(f.shard); err != nil {
			return err
		}
	}
	if cmd.Flags().Changed("seed") && f.seed == 0 {
		return errors.New("--seed: 0 is not a seed (leave --seed out for a random one)")
	}
	if f.size != "" {
		n, err := scenario.ParseSize(f.size)
		if err != nil {
			return fmt.Errorf("--size: %w", err)
		}
		opt.Size = n
	}
	if f.reps < 0 || f.reps > scenario.MaxReps {
		return fmt.Errorf("--reps: %d is outside 1..%d", f.reps, scenario.MaxReps)
	}
	release, lockWarning, err := startLab(stderr, f.out, f.force)
	if err != nil {
		return err
	}
	defer release()
	opt.Seed = cmp.Or(f.seed, s.Experiment.Seed)
	if opt.Seed == 0 {
		opt.Seed = runner.NewSeed()
	}
	where := ""
	if !opt.Shard.Whole() {
		where = ", shard " + opt.Shard.String()
	}
	fmt.Fprintf(stderr, "%s: seed %d%s (repeat with --seed %d)\n", s.Name, opt.Seed, where, opt.Seed)
	ctx, progress, stop := labContext(cmd)
	defer stop()
	opt.Progress, opt.Terminal = progress, isTerminal(stderr)
	run, runErr := runner.Run(ctx, s, opt)
	if errors.Is(runErr, context.Canceled) && run != nil {
		runErr = fmt.Errorf("interrupted after %d of %d points; the testbed was removed", len(run.Points), len(opt.Shard.Filter(only.Points(s))))
	}
	if run == nil || (runErr != nil && len(run.Points) == 0) {
		return runErr
	}
	if lockWarning != "" {
		run.Warnings = append(run.Warnings, lockWarning)
	}
	if err := finishLab(cmd, f.out, f.json, report.Document(run), func(w io.Writer) { printLabTable(w, run, demo) }); err != nil {
		return err
	}
	return runErr
}

// startLab is how every driver starts: the output directory made first, so
// that a bad --out fails before the run rather than after it, then the
// machine's lab lock (lockLab).
func startLab(stderr io.Writer, out string, force bool) (release func(), warning string, err error) {
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, "", err
		}
	}
	return lockLab(stderr, force)
}

// labContext is what every driver runs in: Ctrl-C and SIGTERM cancel ctx,
// and so does the first progress line that cannot be written to stderr.
// With SIGPIPE ignored, `braid lab … | head` makes a closed stdout or
// stderr a write error instead of death before the namespaces are
// removed. (Not signal.Notify: that would also report every EPIPE of the
// lab's own sockets, such as the web server's when a competing download
// stops.)
func labContext(cmd *cobra.Command) (ctx context.Context, progress io.Writer, stop func()) {
	ctx, stopSignals := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithCancelCause(ctx)
	progress = cancelWriter{cmd.ErrOrStderr(), cancel}
	return ctx, progress, func() { cancel(nil); stopSignals() }
}

// cancelWriter is w whose failed writes cancel a run.
type cancelWriter struct {
	w      io.Writer
	cancel context.CancelCauseFunc
}

func (c cancelWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	if err != nil {
		c.cancel(fmt.Errorf("writing progress: %w", err))
	}
	return n, err
}

// finishLab is how every driver ends: its report written into out (when
// given), then its result printed, as one indented JSON document with
// --json, else as text (the document's own without a text of the driver's).
func finishLab(cmd *cobra.Command, out string, asJSON bool, doc *report.Doc, text func(io.Writer)) error {
	if out != "" {
		if _, err := doc.Write(out); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "report written to %s\n", out)
	}
	w := cmd.OutOrStdout()
	switch {
	case asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc.JSON)
	case text != nil:
		text(w)
	default:
		doc.WriteText(w)
	}
	return nil
}

// printLabTable writes one row per point: its sweep parameters (the demo has
// none but the transport), mean goodput with its 95% interval, the number of
// downloads and the share of each path.
func printLabTable(w io.Writer, run *results.Run, demo bool) {
	var axes []string
	for _, a := range run.Axes {
		if a != string(scenario.AxisTransport) && !demo {
			axes = append(axes, a)
		}
	}
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

func newLabMergeCmd() *cobra.Command {
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "merge RESULTS...",
		Short: "Merge the shards of a campaign (lab run --shard I/N) into one report",
		Long: `merge reads the results.json of every shard (a file or the --out directory of
a lab run --shard I/N) and joins them into one run, as if it had been made in
one go: the points in the scenario file's order, each shard's host, commit, load
and command in a table. The shards must come from one campaign (scenario, seed,
size, repetitions, emulator and --only alike) and measure different points;
missing shards and shards of different commits are warnings in the report.`,
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
			run.Command = labArgs()
			return finishLab(cmd, out, asJSON, report.Document(run), func(w io.Writer) { printLabTable(w, run, false) })
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for the merged results.json, samples.csv, summary.csv, report.md and plots")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the merged results as one JSON document on stdout")
	return cmd
}

// labNum is how the run's table writes a number it has not got.
var labNum = table.Style{NaN: "—"}

func fmtShares(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
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
