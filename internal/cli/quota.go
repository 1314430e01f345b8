package cli

// `berth quota set|describe`: client quotas through AlterClientQuotas and
// DescribeClientQuotas, as kafka-configs.sh --entity-type users|clients|ips
// does (its --entity-type/--entity-name/--entity-default flags work here
// too), with shorter entity flags (--user, --client-id, --ip and their
// -default forms).

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func init() { clientCommands = append(clientCommands, newQuotaCmd) }

func newQuotaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Set and describe client quotas (byte, record, request, mutation and connection rates) per user, client id or ip",
		Args:  cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newQuotaSetCmd(cf), newQuotaDescribeCmd(cf))
	return cmd
}

// entityFlags name a quota entity.
type entityFlags struct {
	user, client, ip                      string
	userDefault, clientDefault, ipDefault bool
	types, names                          []string // kafka-configs.sh style
	entityDefault                         bool
}

func addEntityFlags(cmd *cobra.Command) *entityFlags {
	e := &entityFlags{}
	fs := cmd.Flags()
	fs.StringVar(&e.user, "user", "", "the user (principal name) the quota is for")
	fs.BoolVar(&e.userDefault, "user-default", false, "the default user entity (every user without its own quota)")
	fs.StringVar(&e.client, "client-id", "", "the client id the quota is for")
	fs.BoolVar(&e.clientDefault, "client-id-default", false, "the default client-id entity")
	fs.StringVar(&e.ip, "ip", "", "the client IP address (connection_creation_rate only)")
	fs.BoolVar(&e.ipDefault, "ip-default", false, "the default ip entity")
	fs.StringArrayVar(&e.types, "entity-type", nil, "kafka-configs.sh style: users, clients or ips (repeat for users and clients)")
	fs.StringArrayVar(&e.names, "entity-name", nil, "kafka-configs.sh style: the name of each --entity-type, in order")
	fs.BoolVar(&e.entityDefault, "entity-default", false, "kafka-configs.sh style: the --entity-type given no --entity-name is its default entity")
	return e
}

// entitySpec is one entity type of a command line: set (named or
// default) or, for describe, any.
type entitySpec struct {
	typ      string // user, client-id, ip
	name     *string
	dflt     bool
	anyMatch bool
}

// parse returns the entity's parts. With forDescribe, a kafka-configs.sh
// --entity-type without name or --entity-default matches any name.
func (e *entityFlags) parse(cmd *cobra.Command, forDescribe bool) ([]entitySpec, error) {
	var out []entitySpec
	add := func(typ, name string, nameSet, dflt bool) error {
		for _, s := range out {
			if s.typ == typ {
				return fmt.Errorf("the %s entity is named twice", typ)
			}
		}
		switch {
		case nameSet && dflt:
			return fmt.Errorf("give either a %s name or its default, not both", typ)
		case nameSet:
			out = append(out, entitySpec{typ: typ, name: &name})
		case dflt:
			out = append(out, entitySpec{typ: typ, dflt: true})
		}
		return nil
	}
	f := cmd.Flags()
	for _, x := range []struct {
		typ, flag string
		name      string
		dflt      bool
	}{{"user", "user", e.user, e.userDefault}, {"client-id", "client-id", e.client, e.clientDefault}, {"ip", "ip", e.ip, e.ipDefault}} {
		if err := add(x.typ, x.name, f.Changed(x.flag), x.dflt); err != nil {
			return nil, err
		}
	}
	if len(e.names) > len(e.types) {
		return nil, fmt.Errorf("%d --entity-name for %d --entity-type", len(e.names), len(e.types))
	}
	for i, t := range e.types {
		typ, ok := map[string]string{"users": "user", "user": "user", "clients": "client-id", "client-id": "client-id", "ips": "ip", "ip": "ip"}[t]
		if !ok {
			return nil, fmt.Errorf("--entity-type %q: want users, clients or ips", t)
		}
		if i < len(e.names) {
			if err := add(typ, e.names[i], true, false); err != nil {
				return nil, err
			}
			continue
		}
		if !e.entityDefault {
			if !forDescribe {
				return nil, fmt.Errorf("--entity-type %s needs --entity-name or --entity-default", t)
			}
			out = append(out, entitySpec{typ: typ, anyMatch: true})
			continue
		}
		if err := add(typ, "", false, true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func newQuotaSetCmd(cf *clientFlags) *cobra.Command {
	var add, del string
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Set or remove quota values of one entity (AlterClientQuotas)",
		Long: `Set or remove quota values of one quota entity: a user, a client id, a user and
client id together, or an IP address, each by name or as the default entity of
its type (Kafka's precedence decides which entity's value applies to a
connection: docs/security.md#quotas).

Keys: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage
(percent of one thread's time), controller_mutation_rate (partitions created
or deleted per second), connection_creation_rate (ip entities only), and
Berth's producer_record_rate (records/s), max_record_bytes and
violation_action (throttle or reject; stored as 0 or 1).`,
		Args: cobra.NoArgs,
	}
	ef := addEntityFlags(cmd)
	cmd.Flags().StringVar(&add, "add-config", "", "quota values to set: key=value,... (e.g. producer_byte_rate=1048576,violation_action=reject)")
	cmd.Flags().StringVar(&del, "delete-config", "", "quota keys to remove: key,...")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		specs, err := ef.parse(cmd, false)
		if err != nil {
			return err
		}
		if len(specs) == 0 {
			return fmt.Errorf("name an entity: --user, --client-id, --ip (or their -default forms, or --entity-type/--entity-name)")
		}
		ops, err := quotaOps(add, del)
		if err != nil {
			return err
		}
		var ent kadm.ClientQuotaEntity
		for _, s := range specs {
			ent = append(ent, kadm.ClientQuotaEntityComponent{Type: s.typ, Name: s.name})
		}
		return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
			res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: ops}})
			if err != nil {
				return cf.explain(err)
			}
			for _, r := range res {
				if r.Err != nil {
					return cf.explain(withBrokerMessage(r.Err, r.ErrMessage))
				}
			}
			if cf.json {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"entity": entityJSON(ent), "set": len(ops)})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Quotas of %s updated.\n", entityText(ent))
			return nil
		})
	}
	return cmd
}

// quotaOps parses --add-config and --delete-config.
func quotaOps(add, del string) ([]kadm.AlterClientQuotaOp, error) {
	var ops []kadm.AlterClientQuotaOp
	for _, kv := range splitList(add) {
		k, v, ok := cutKV(kv)
		if !ok {
			return nil, fmt.Errorf("--add-config %q: want key=value", kv)
		}
		var f float64
		switch {
		case k == "violation_action" && v == "throttle":
			f = 0
		case k == "violation_action" && v == "reject":
			f = 1
		default:
			var err error
			if f, err = strconv.ParseFloat(v, 64); err != nil {
				return nil, fmt.Errorf("--add-config %s=%s: not a number", k, v)
			}
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
	}
	for _, k := range splitList(del) {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("nothing to change: give --add-config key=value,... and/or --delete-config key,...")
	}
	return ops, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func newQuotaDescribeCmd(cf *clientFlags) *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Show client quotas (DescribeClientQuotas), all or those of the entities named",
		Long: `Show client quotas. With no entity flags, every quota entity; --user NAME,
--client-id ID or --ip ADDR match that name, the -default forms the default
entity of the type, and --entity-type without a name any entity of that type.
Entities naming other types too are shown unless --strict.`,
		Args: cobra.NoArgs,
	}
	ef := addEntityFlags(cmd)
	cmd.Flags().BoolVar(&strict, "strict", false, "only entities with exactly the types named")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		specs, err := ef.parse(cmd, true)
		if err != nil {
			return err
		}
		var comps []kadm.DescribeClientQuotaComponent
		for _, s := range specs {
			c := kadm.DescribeClientQuotaComponent{Type: s.typ, MatchName: s.name}
			switch {
			case s.anyMatch:
				c.MatchType = 2
			case s.dflt:
				c.MatchType = 1
			}
			comps = append(comps, c)
		}
		return withAdmin(cmd, cf, func(ctx context.Context, adm *kadm.Client) error {
			qs, err := adm.DescribeClientQuotas(ctx, strict, comps)
			if err != nil {
				return cf.explain(err)
			}
			if cf.json {
				out := make([]map[string]any, 0, len(qs))
				for _, q := range qs {
					vals := map[string]float64{}
					for _, v := range q.Values {
						vals[v.Key] = v.Value
					}
					out = append(out, map[string]any{"entity": entityJSON(q.Entity), "values": vals})
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return printQuotas(cmd.OutOrStdout(), qs)
		})
	}
	return cmd
}

func printQuotas(w io.Writer, qs kadm.DescribedClientQuotas) error {
	if len(qs) == 0 {
		fmt.Fprintln(w, "No client quotas match.")
		return nil
	}
	t := newTable(w, "ENTITY", "QUOTA", "VALUE")
	for _, q := range qs {
		vals := append(kadm.ClientQuotaValues(nil), q.Values...)
		sort.Slice(vals, func(i, j int) bool { return vals[i].Key < vals[j].Key })
		for _, v := range vals {
			t.row(entityText(q.Entity), v.Key, quotaValueText(v.Key, v.Value))
		}
	}
	return t.flush()
}

func quotaValueText(key string, v float64) string {
	if key == "violation_action" {
		switch v {
		case 0:
			return "throttle"
		case 1:
			return "reject"
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// entityText is an entity as kafka-configs.sh prints it: user=alice,client-id=<default>.
func entityText(e kadm.ClientQuotaEntity) string {
	var parts []string
	for _, c := range e {
		n := "<default>"
		if c.Name != nil {
			n = *c.Name
		}
		parts = append(parts, c.Type+"="+n)
	}
	return strings.Join(parts, ",")
}

// entityJSON maps each type to its name, null for the default entity.
func entityJSON(e kadm.ClientQuotaEntity) map[string]*string {
	out := map[string]*string{}
	for _, c := range e {
		out[c.Type] = c.Name
	}
	return out
}
