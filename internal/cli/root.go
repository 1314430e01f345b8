// Package cli holds berth's subcommands. Everything except `serve` is a client
// of the Kafka protocol (kgo/kadm) or the HTTP API: no back doors.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the berth command line and returns the process exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

// Run runs the berth command line in this process with the given input
// and outputs until ctx is done, for tests that drive the CLI.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "berth",
		Short:         "Berth: a durable, Kafka-compatible message broker in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd())
	for _, add := range clientCommands {
		root.AddCommand(add())
	}
	return root
}

// clientCommands is filled by the init functions of the client subcommand
// files (topic.go, produce.go, ...), so each file registers itself.
var clientCommands []func() *cobra.Command
