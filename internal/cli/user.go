package cli

// `berth user`: SCRAM users as kafka-configs.sh --entity-type users
// manages them, over DescribeUserScramCredentials and
// AlterUserScramCredentials (KIP-554) through kadm. The salt and salted
// password are computed here, on the client; the broker stores only the
// keys derived from them.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { clientCommands = append(clientCommands, newUserCmd) }

func newUserCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "user",
		Aliases: []string{"users"},
		Short:   "Create, list and delete SCRAM users (SASL SCRAM-SHA-256/512 credentials)",
		Args:    cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newUserCreateCmd(cf), newUserListCmd(cf), newUserDeleteCmd(cf))
	return cmd
}

func parseScramMechanism(s string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(s) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

// readPassword takes the password from --password, --password-file or,
// without either, a line of standard input (a prompt when it is a
// terminal).
func readPassword(cmd *cobra.Command, password, file string) (string, error) {
	switch {
	case password != "" && file != "":
		return "", errors.New("give --password or --password-file, not both")
	case password != "":
		return password, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--password-file: %w", err)
		}
		p := strings.TrimRight(string(b), "\r\n")
		if p == "" {
			return "", fmt.Errorf("--password-file %s is empty", file)
		}
		return p, nil
	}
	if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		fmt.Fprint(cmd.ErrOrStderr(), "Password: ")
	}
	line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		if err != nil {
			return "", fmt.Errorf("no password: give --password, --password-file or type it on standard input (%v)", err)
		}
		return "", errors.New("empty password")
	}
	return line, nil
}

func newUserCreateCmd(cf *clientFlags) *cobra.Command {
	var (
		password, file, mechanism string
		iterations                int32
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a SCRAM user, or set a new password for one",
		Example: `  berth user create alice --mechanism SCRAM-SHA-512 --password-file alice.pw
  echo "$PW" | berth user create alice`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mech, err := parseScramMechanism(mechanism)
			if err != nil {
				return err
			}
			if iterations < 4096 || iterations > 16384 {
				return fmt.Errorf("--iterations %d: must be between 4096 and 16384", iterations)
			}
			pw, err := readPassword(cmd, password, file)
			if err != nil {
				return err
			}
			return withClients(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
				// kadm salts (24 random bytes) and runs PBKDF2 here.
				res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: args[0], Mechanism: mech, Iterations: iterations, Password: pw}})
				if err != nil {
					return cf.explain(err)
				}
				if r, ok := res[args[0]]; ok && r.Err != nil {
					return fmt.Errorf("user %q: %w", args[0], cf.explain(withBrokerMessage(r.Err, r.ErrMessage)))
				}
				if cf.json {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"user": args[0], "mechanism": mech.String(), "iterations": iterations})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "user %q: %s credential set (%d iterations)\n", args[0], mech, iterations)
				return nil
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&password, "password", "", "the password (visible in the shell history and process list: prefer --password-file or standard input)")
	fs.StringVar(&file, "password-file", "", "read the password from this file (its first line)")
	fs.StringVar(&mechanism, "mechanism", "SCRAM-SHA-512", "SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.Int32Var(&iterations, "iterations", 8192, "PBKDF2 iterations, 4096 to 16384")
	return cmd
}

type userEntry struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func newUserListCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list [NAME...]",
		Aliases: []string{"ls", "describe"},
		Short:   "List SCRAM users with their mechanisms and iteration counts (never a secret)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClients(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
				desc, err := adm.DescribeUserSCRAMs(ctx, args...)
				if err != nil {
					return cf.explain(err)
				}
				var out []userEntry
				var failed []error
				for _, name := range slices.Sorted(maps.Keys(desc)) {
					d := desc[name]
					if d.Err != nil {
						failed = append(failed, fmt.Errorf("user %q: %w", name, cf.explain(withBrokerMessage(d.Err, d.ErrMessage))))
						continue
					}
					for _, ci := range d.CredInfos {
						out = append(out, userEntry{name, ci.Mechanism.String(), ci.Iterations})
					}
				}
				if cf.json {
					if out == nil {
						out = []userEntry{}
					}
					if err := writeJSON(cmd.OutOrStdout(), out); err != nil {
						return err
					}
				} else {
					t := newTable(cmd.OutOrStdout(), "USER", "MECHANISM", "ITERATIONS")
					for _, e := range out {
						t.row(e.User, e.Mechanism, e.Iterations)
					}
					if err := t.flush(); err != nil {
						return err
					}
				}
				return errors.Join(failed...)
			})
		},
	}
	return cmd
}

func newUserDeleteCmd(cf *clientFlags) *cobra.Command {
	var mechanism string
	cmd := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete SCRAM users' credentials (every mechanism, or --mechanism's)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClients(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
				var dels []kadm.DeleteSCRAM
				if mechanism != "" {
					mech, err := parseScramMechanism(mechanism)
					if err != nil {
						return err
					}
					for _, u := range args {
						dels = append(dels, kadm.DeleteSCRAM{User: u, Mechanism: mech})
					}
				} else {
					desc, err := adm.DescribeUserSCRAMs(ctx, args...)
					if err != nil {
						return cf.explain(err)
					}
					for _, u := range args {
						d := desc[u]
						if d.Err != nil {
							if errors.Is(d.Err, kerr.ResourceNotFound) {
								return fmt.Errorf("user %q has no SCRAM credentials (see `berth user list`)", u)
							}
							return fmt.Errorf("user %q: %w", u, cf.explain(d.Err))
						}
						for _, ci := range d.CredInfos {
							dels = append(dels, kadm.DeleteSCRAM{User: u, Mechanism: ci.Mechanism})
						}
					}
				}
				res, err := adm.AlterUserSCRAMs(ctx, dels, nil)
				if err != nil {
					return cf.explain(err)
				}
				var failed []error
				for _, u := range args {
					if r := res[u]; r.Err != nil {
						failed = append(failed, fmt.Errorf("user %q: %w", u, cf.explain(withBrokerMessage(r.Err, r.ErrMessage))))
					} else if !cf.json {
						fmt.Fprintf(cmd.OutOrStdout(), "user %q deleted\n", u)
					}
				}
				if cf.json {
					if err := writeJSON(cmd.OutOrStdout(), map[string]any{"deleted": len(args) - len(failed)}); err != nil {
						return err
					}
				}
				return errors.Join(failed...)
			})
		},
	}
	cmd.Flags().StringVar(&mechanism, "mechanism", "", "delete only this mechanism's credential (SCRAM-SHA-256 or SCRAM-SHA-512)")
	return cmd
}
