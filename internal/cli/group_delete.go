package cli

// `berth group delete`: DeleteGroups, after asking (confirm.go).

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupDeleteResult struct {
	Group   string `json:"group"`
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

// deleteQuestion is what `group delete` asks before deleting.
func deleteQuestion(names []string) string {
	if len(names) == 1 {
		return fmt.Sprintf("Delete group %s and its committed offsets?", names[0])
	}
	return fmt.Sprintf("Delete %d groups (%s) and their committed offsets?", len(names), strings.Join(names, ", "))
}

func newGroupDeleteCmd(cf *clientFlags) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "delete GROUP...",
		Aliases: []string{"rm"},
		Short:   "Delete empty consumer groups and their committed offsets",
		Example: `  berth group delete billing --yes`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := checkGroupNames(args)
			if err != nil {
				return err
			}
			if !yes {
				if !stdinIsTerminal(cmd.InOrStdin()) {
					return errors.New("refusing to delete groups without confirmation: stdin is not a terminal (pass --yes)")
				}
				if !confirm(cmd, deleteQuestion(names)) {
					return errors.New("aborted: nothing was deleted")
				}
			}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
				apis, err := fetchServedAPIs(ctx, adm)
				if err != nil {
					return cf.explain(err)
				}
				if err := apis.require(kmsg.FindCoordinator, kmsg.DeleteGroups); err != nil {
					return err
				}
				resps, rerr := adm.DeleteGroups(ctx, names...)
				if rerr != nil && len(resps) == 0 {
					return cf.explain(rerr)
				}
				results := make([]groupDeleteResult, 0, len(names))
				var errs []error
				for _, name := range names {
					res := groupDeleteResult{Group: name}
					r, ok := resps[name]
					switch {
					case !ok:
						e := rerr
						if e == nil {
							e = errors.New("missing from the DeleteGroups response")
						}
						res.Error = kerrName(e)
						errs = append(errs, groupErr(cf, name, e, ""))
					case r.Err == nil:
						res.Deleted = true
					default:
						res.Error = kerrName(r.Err)
						errs = append(errs, groupErr(cf, name, r.Err, r.ErrMessage))
					}
					results = append(results, res)
				}
				out := cmd.OutOrStdout()
				if cf.json {
					err = writeJSON(out, results)
				} else {
					for _, r := range results {
						if r.Deleted {
							if _, err = fmt.Fprintf(out, "Deleted group %s.\n", r.Group); err != nil {
								break
							}
						}
					}
				}
				return errors.Join(append([]error{err}, errs...)...)
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}
