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

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
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
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: tests call it with their own arguments,
// output and context, and read the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := kingpin.New("llm-prober", "Probes LLM inference servers and exports time-to-first-token, time-per-output-token and more to Prometheus.")
	app.UsageWriter(stderr)
	app.ErrorWriter(stderr)
	app.Version(version.Print("llm-prober"))
	app.HelpFlag.Short('h')
	exitCode := -1
	app.Terminate(func(code int) {
		if exitCode < 0 {
			exitCode = code
		}
	})

	var logCfg promslog.Config
	promslogflag.AddFlags(app, &logCfg)
	// Each command has its own --config.file; the daemon's flags sit on
	// the default command, so `llm-prober --web.listen-address=…` works
	// without naming it, as with every other exporter.
	serveCmd := app.Command("serve", "Run the prober daemon (the default).").Default()
	configFile := serveCmd.Flag("config.file", "llm-prober configuration file.").Default("llm-prober.yml").String()
	webFlags := kingpinflag.AddFlags(serveCmd, defaultListenAddress)
	shutdownTimeout := serveCmd.Flag("web.shutdown-timeout", "How long to wait for in-flight probes and requests when stopping.").Default("30s").Duration()
	disableReload := serveCmd.Flag("web.disable-reload", "Refuse POST /-/reload (SIGHUP still reloads).").Bool()
	webPaths := webroute.AddFlags(serveCmd)
	historyResults := serveCmd.Flag("history.results-per-probe", "Recent results kept per probe for the status page (0 keeps none).").Default("100").Int()
	sh := shard.AddFlags(serveCmd)

	checkCmd := app.Command("check-config", "Validate configuration files and exit 0 if all are valid, 1 otherwise.")
	checkFiles := checkCmd.Arg("file", "Configuration files to check.").Default("llm-prober.yml").Strings()
	checkPrint := checkCmd.Flag("print", "Print the effective configuration with defaults filled in and secrets hidden.").Bool()

	probeCmd := app.Command("probe", "Send one probe now and print a breakdown of its timings.")
	probeConfig := probeCmd.Flag("config.file", "llm-prober configuration file.").Default("llm-prober.yml").String()
	probeTarget := probeCmd.Flag("target", "Name of the target to probe.").Required().String()
	probeName := probeCmd.Flag("probe", "Name of the probe (default: the target's first).").String()

	benchCmd := bench.AddCommand(app)
	mergeCmd := bench.AddMergeCommand(app)

	simCmd := app.Command("simulate", "Run the built-in simulated LLM server (OpenAI-compatible, vLLM metrics, ground truth, fault injection).")
	simFlags := simulator.RegisterFlags(simCmd)

	cmd, err := app.Parse(args)
	if exitCode >= 0 {
		return exitCode // --help or --version
	}
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober: %v; try --help\n", err)
		return 2
	}
	logCfg.Writer = stderr
	// Every subcommand's logs pass the redaction policy (internal/redact).
	logger := slog.New(redact.NewHandler(promslog.New(&logCfg).Handler(), nil))

	switch cmd {
	case checkCmd.FullCommand():
		return checkConfig(*checkFiles, *checkPrint, stdout, stderr)
	case probeCmd.FullCommand():
		return probeOnce(ctx, *probeConfig, *probeTarget, *probeName, logger, stdout, stderr)
	case benchCmd.Cmd.FullCommand():
		return benchCmd.Main(ctx, logger, stdout, stderr)
	case mergeCmd.Cmd.FullCommand():
		return mergeCmd.Main(stdout, stderr)
	case simCmd.FullCommand():
		if err := simulator.Run(ctx, simFlags, logger); err != nil {
			fmt.Fprintf(stderr, "llm-prober simulate: %v\n", err)
			return 1
		}
		return 0
	default:
		paths, err := webPaths()
		if err != nil {
			fmt.Fprintf(stderr, "llm-prober: %v\n", err)
			return 2
		}
		return serve(ctx, serveOptions{
			paths:           paths,
			configFile:      *configFile,
			webFlags:        webFlags,
			shutdownTimeout: *shutdownTimeout,
			disableReload:   *disableReload,
			historyResults:  *historyResults,
			logger:          logger,
			stderr:          stderr,
			shard:           *sh,
		})
	}
}
