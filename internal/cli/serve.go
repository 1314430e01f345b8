package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berthmq/berth/internal/app"
	"github.com/berthmq/berth/internal/config"
)

func newServeCmd() *cobra.Command {
	var file string
	var sets []string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a broker node (a complete single-node cluster with no flags)",
		Long: `Run a broker node. With no flags it is a complete single-node cluster:
Kafka protocol on 127.0.0.1:9092, HTTP (/metrics) on 127.0.0.1:8081, data in ./berth-data.
For a cluster give every node a distinct --node.id, the same
--controller.quorum.voters (id@host:port of each voter's controller listener)
and a CONTROLLER://host:port entry in --listeners (README, "A three-node
cluster").

Every setting can come from a properties file (--config), a BERTH_* environment
variable (log.dirs -> BERTH_LOG_DIRS) or a flag (--log.dirs); flags win.
See docs/configuration.md for the full list.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Defaults()
			if file != "" {
				ignored, err := cfg.LoadFile(file)
				if err != nil {
					return err
				}
				if len(ignored) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: ignoring settings Berth does not use: %s\n", file, strings.Join(ignored, ", "))
				}
			}
			if err := cfg.LoadEnv(os.Environ()); err != nil {
				return err
			}
			var ferr error
			cmd.Flags().Visit(func(f *pflag.Flag) {
				if _, ok := config.LookupBroker(f.Name); ok && ferr == nil {
					ferr = cfg.Set(f.Name, f.Value.String(), config.SourceFlag)
				}
			})
			if ferr != nil {
				return ferr
			}
			for _, kv := range sets {
				k, v, ok := cutKV(kv)
				if !ok {
					return fmt.Errorf("--override %q: want key=value", kv)
				}
				if err := cfg.Set(k, v, config.SourceFlag); err != nil {
					return err
				}
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			return app.Run(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&file, "config", "", "properties file (key=value lines, Kafka's server.properties form)")
	cmd.Flags().StringArrayVar(&sets, "override", nil, "key=value setting, as Kafka's --override (repeatable)")
	for _, d := range config.BrokerDefs() {
		cmd.Flags().String(d.Name, d.DefaultText(), d.Doc) // only flags given are read (Visit)
	}
	return cmd
}
