// Command llm-prober probes LLM inference servers and exports how fast they
// answer to Prometheus.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
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
	configFile := app.Flag("config.file", "llm-prober configuration file.").Default("llm-prober.yml").String()

	// Daemon flags live on the application rather than on the serve command
	// so that `llm-prober --web.listen-address=…` works without naming the
	// default command, as with every other exporter.
	webFlags := kingpinflag.AddFlags(app, defaultListenAddress)
	shutdownTimeout := app.Flag("web.shutdown-timeout", "How long to wait for in-flight probes and requests when stopping.").Default("30s").Duration()
	disableReload := app.Flag("web.disable-reload", "Refuse POST /-/reload (SIGHUP still reloads).").Bool()
	app.Command("serve", "Run the prober daemon (the default).").Default()

	checkCmd := app.Command("check-config", "Validate configuration files and exit 0 if all are valid, 1 otherwise.")
	checkFiles := checkCmd.Arg("file", "Configuration files to check (default: --config.file).").Strings()
	checkPrint := checkCmd.Flag("print", "Print the effective configuration with defaults filled in and secrets hidden.").Bool()

	cmd, err := app.Parse(args)
	if exitCode >= 0 {
		return exitCode // --help or --version
	}
	if err != nil {
		fmt.Fprintf(stderr, "llm-prober: %v; try --help\n", err)
		return 2
	}
	logCfg.Writer = stderr
	logger := promslog.New(&logCfg)

	switch cmd {
	case checkCmd.FullCommand():
		files := *checkFiles
		if len(files) == 0 {
			files = []string{*configFile}
		}
		return checkConfig(files, *checkPrint, stdout, stderr)
	default:
		return serve(ctx, serveOptions{
			configFile:      *configFile,
			webFlags:        webFlags,
			shutdownTimeout: *shutdownTimeout,
			disableReload:   *disableReload,
			logger:          logger,
			stderr:          stderr,
		})
	}
}
