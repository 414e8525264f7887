// Command llm-prober probes LLM inference servers and exports how fast they
// answer to Prometheus.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/llm-prober/llm-prober/bench"
	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/internal/webroute"
	"github.com/llm-prober/llm-prober/shard"
	"github.com/llm-prober/llm-prober/simulator"
)

const (
	programName = "llm_prober"
	// defaultListenAddress is a port from a gap in the Prometheus default
	// port allocations list (see README).
	defaultListenAddress = ":9847"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fillVersion()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// cli is the command line: the kingpin application and where each
// command's flags land once parsed.
type cli struct {
	app *kingpin.Application
	// exitCode is what --help or --version asked to exit with; -1 until
	// one of them ran.
	exitCode *int
	logCfg   *promslog.Config

	serveCmd        *kingpin.CmdClause
	configFile      *string
	webFlags        *web.FlagConfig
	shutdownTimeout *time.Duration
	disableReload   *bool
	webPaths        func() (webroute.Paths, error)
	historyResults  *int
	shard           *shard.Shard

	checkCmd   *kingpin.CmdClause
	checkFiles *[]string
	checkPrint *bool

	probeCmd    *kingpin.CmdClause
	probeConfig *string
	probeTarget *string
	probeName   *string

	benchCmd *bench.Flags
	mergeCmd *bench.MergeFlags

	simCmd   *kingpin.CmdClause
	simFlags *simulator.Flags
}

// newCLI defines every command and flag, writing usage and errors to
// stderr. Tests walk its application to run each command's --help.
func newCLI(stderr io.Writer) *cli {
	app := kingpin.New("llm-prober", "Probes LLM inference servers and exports time-to-first-token, time-per-output-token and more to Prometheus.")
	app.UsageWriter(stderr)
	app.ErrorWriter(stderr)
	app.Version(version.Print("llm-prober"))
	app.HelpFlag.Short('h')
	exitCode := -1
	// Terminate records the code instead of exiting, so that run returns
	// it and tests can call run.
	app.Terminate(func(code int) {
		if exitCode < 0 {
			exitCode = code
		}
	})
	c := &cli{app: app, exitCode: &exitCode, logCfg: &promslog.Config{}}

	promslogflag.AddFlags(app, c.logCfg)
	// Each command has its own --config.file; the daemon's flags sit on
	// the default command, so `llm-prober --web.listen-address=…` works
	// without naming it, as with every other exporter.
	c.serveCmd = app.Command("serve", "Run the prober daemon (the default).").Default()
	c.configFile = c.serveCmd.Flag("config.file", "llm-prober configuration file.").Default("llm-prober.yml").String()
	c.webFlags = kingpinflag.AddFlags(c.serveCmd, defaultListenAddress)
	c.shutdownTimeout = c.serveCmd.Flag("web.shutdown-timeout", "How long stopping may take: in-flight probes get 60% of it to finish, are then cancelled and recorded (outcome cancelled); remote write flushes until 90%; the web server stops last.").Default("30s").Duration()
	c.disableReload = c.serveCmd.Flag("web.disable-reload", "Refuse POST /-/reload (SIGHUP still reloads).").Bool()
	c.webPaths = webroute.AddFlags(c.serveCmd)
	c.historyResults = c.serveCmd.Flag("history.results-per-probe", "Recent results kept per probe for the status page (0 keeps none).").Default("100").Int()
	c.shard = shard.AddFlags(c.serveCmd)

	c.checkCmd = app.Command("check-config", "Validate configuration files and exit 0 if all are valid, 1 otherwise.")
	c.checkFiles = c.checkCmd.Arg("file", "Configuration files to check.").Default("llm-prober.yml").Strings()
	c.checkPrint = c.checkCmd.Flag("print", "Print the effective configuration with defaults filled in and secrets hidden.").Bool()

	c.probeCmd = app.Command("probe", "Send one probe now and print a breakdown of its timings.")
	c.probeConfig = c.probeCmd.Flag("config.file", "llm-prober configuration file.").Default("llm-prober.yml").String()
	c.probeTarget = c.probeCmd.Flag("target", "Name of the target to probe.").Required().String()
	c.probeName = c.probeCmd.Flag("probe", "Name of the probe (default: the target's first).").String()

	c.benchCmd = bench.AddCommand(app)
	c.mergeCmd = bench.AddMergeCommand(app)

	c.simCmd = app.Command("simulate", "Run the built-in simulated LLM server (OpenAI-compatible, vLLM metrics, ground truth, fault injection).")
	c.simFlags = simulator.RegisterFlags(c.simCmd)
	return c
}

// run is main without the process: tests call it with their own arguments,
// output and context, and read the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCLI(stderr)
	cmd, err := c.app.Parse(args)
	if *c.exitCode >= 0 {
		return *c.exitCode // --help or --version
	}
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober: %v; try --help\n", err)
		return 2
	}
	c.logCfg.Writer = stderr
	// Every subcommand's logs pass the redaction policy (internal/redact).
	logger := slog.New(redact.NewHandler(promslog.New(c.logCfg).Handler(), nil))

	switch cmd {
	case c.checkCmd.FullCommand():
		return checkConfig(*c.checkFiles, *c.checkPrint, stdout, stderr)
	case c.probeCmd.FullCommand():
		return probeOnce(ctx, *c.probeConfig, *c.probeTarget, *c.probeName, logger, stdout, stderr)
	case c.benchCmd.Cmd.FullCommand():
		return c.benchCmd.Main(ctx, logger, stdout, stderr)
	case c.mergeCmd.Cmd.FullCommand():
		return c.mergeCmd.Main(stdout, stderr)
	case c.simCmd.FullCommand():
		if err := simulator.Run(ctx, c.simFlags, logger); err != nil {
			fmt.Fprintf(stderr, "llm-prober simulate: %v\n", err)
			return 1
		}
		return 0
	default:
		paths, err := c.webPaths()
		if err != nil {
			fmt.Fprintf(stderr, "llm-prober: %v\n", err)
			return 2
		}
		return serve(ctx, serveOptions{
			paths:           paths,
			configFile:      *c.configFile,
			webFlags:        c.webFlags,
			shutdownTimeout: *c.shutdownTimeout,
			disableReload:   *c.disableReload,
			historyResults:  *c.historyResults,
			logger:          logger,
			stderr:          stderr,
			shard:           *c.shard,
		})
	}
}
