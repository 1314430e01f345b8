package cli

// `berth acl create|list|delete`: kafka-acls.sh's --add, --list and
// --remove with its flags (--allow-principal, --deny-principal,
// --allow-host, --deny-host, --operation, --topic, --group, --cluster,
// --subject (Berth's schema registry subjects),
// --transactional-id, --resource-pattern-type, and the --producer,
// --consumer and --idempotent conveniences), over CreateAcls, DescribeAcls
// and DeleteAcls.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
)

func init() { clientCommands = append(clientCommands, newACLCmd) }

// aclFlags are kafka-acls.sh's flags.
type aclFlags struct {
	allowPrincipals, denyPrincipals []string
	allowHosts, denyHosts           []string
	operations                      []string
	topics, groups, txnIDs          []string
	subjects                        []string // schema registry subjects (Berth's SUBJECT resource)
	cluster                         bool
	pattern                         string
	producer, consumer, idempotent  bool
	principal                       string // list: only this principal's
	yes                             bool   // delete every ACL of the resources without asking
}

func (f *aclFlags) register(cmd *cobra.Command, verb string) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.topics, "topic", nil, "a topic (repeatable); * is every topic")
	fs.StringArrayVar(&f.groups, "group", nil, "a consumer or share group (repeatable); * is every group")
	fs.StringArrayVar(&f.txnIDs, "transactional-id", nil, "a transactional id (repeatable); * is every one")
	fs.StringArrayVar(&f.subjects, "subject", nil, "a schema registry subject (repeatable); * is every subject")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource (kafka-cluster)")
	fs.StringVar(&f.pattern, "resource-pattern-type", "literal", "literal or prefixed; list and delete also take match (the ACLs that apply to the named resources) and any")
	if verb == "list" {
		fs.StringVar(&f.principal, "principal", "", "only the ACLs of this principal (User:NAME)")
		return
	}
	fs.StringArrayVar(&f.allowPrincipals, "allow-principal", nil, "principal to allow, Type:Name (User:alice; User:* is everyone; repeatable)")
	fs.StringArrayVar(&f.denyPrincipals, "deny-principal", nil, "principal to deny, Type:Name (repeatable)")
	fs.StringArrayVar(&f.allowHosts, "allow-host", nil, "IP address the allowed principals may come from (repeatable; default * when a principal is given)")
	fs.StringArrayVar(&f.denyHosts, "deny-host", nil, "IP address the denied principals are denied from (repeatable; default *)")
	fs.StringArrayVar(&f.operations, "operation", nil, "operation (repeatable): Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All (default All)")
	fs.BoolVar(&f.producer, "producer", false, "the producer's ACLs: WRITE, DESCRIBE and CREATE on the topics; WRITE and DESCRIBE on the transactional ids")
	fs.BoolVar(&f.consumer, "consumer", false, "the consumer's ACLs: READ and DESCRIBE on the topics, READ on the groups (needs --group)")
	fs.BoolVar(&f.idempotent, "idempotent", false, "with --producer: IDEMPOTENT_WRITE on the cluster")
	if verb == "delete" {
		fs.BoolVar(&f.yes, "yes", false, "delete without asking when no principal narrows the deletion (every ACL of the resources)")
	}
}

type aclResource struct {
	typ  kmsg.ACLResourceType
	name string
}

// resources are the flags' resources; none when no resource flag is set.
func (f *aclFlags) resources() []aclResource {
	var out []aclResource
	for _, t := range f.topics {
		out = append(out, aclResource{kmsg.ACLResourceTypeTopic, t})
	}
	for _, g := range f.groups {
		out = append(out, aclResource{kmsg.ACLResourceTypeGroup, g})
	}
	for _, x := range f.txnIDs {
		out = append(out, aclResource{kmsg.ACLResourceTypeTransactionalId, x})
	}
	for _, x := range f.subjects {
		out = append(out, aclResource{metadata.ACLResourceTypeSubject, x})
	}
	if f.cluster {
		out = append(out, aclResource{kmsg.ACLResourceTypeCluster, "kafka-cluster"})
	}
	return out
}

func parsePattern(s string, filter bool) (kmsg.ACLResourcePatternType, error) {
	p, err := kmsg.ParseACLResourcePatternType(s)
	if err == nil && (p == kmsg.ACLResourcePatternTypeLiteral || p == kmsg.ACLResourcePatternTypePrefixed ||
		filter && (p == kmsg.ACLResourcePatternTypeMatch || p == kmsg.ACLResourcePatternTypeAny)) {
		return p, nil
	}
	if filter {
		return 0, fmt.Errorf("--resource-pattern-type %q: want literal, prefixed, match or any", s)
	}
	return 0, fmt.Errorf("--resource-pattern-type %q: want literal or prefixed (match and any only filter, for list and delete)", s)
}

// aclEntry is one binding: the rows of every acl command.
type aclEntry struct {
	Principal    string `json:"principal"`
	Permission   string `json:"permission"`
	Operation    string `json:"operation"`
	Host         string `json:"host"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Error        string `json:"error,omitempty"`
}

func (e aclEntry) key() string {
	return strings.Join([]string{e.ResourceType, e.PatternType, e.ResourceName, e.Principal, e.Permission, e.Operation, e.Host}, "\x00")
}

// bindings are the ACLs create makes of the flags (kafka-acls.sh --add).
func (f *aclFlags) bindings() ([]kmsg.CreateACLsRequestCreation, error) {
	pattern, err := parsePattern(f.pattern, false)
	if err != nil {
		return nil, err
	}
	if len(f.allowPrincipals)+len(f.denyPrincipals) == 0 {
		return nil, errors.New("name who the ACL is for: --allow-principal User:NAME or --deny-principal User:NAME")
	}
	for _, p := range append(append([]string(nil), f.allowPrincipals...), f.denyPrincipals...) {
		if i := strings.IndexByte(p, ':'); i <= 0 {
			return nil, fmt.Errorf("principal %q: want Type:Name, e.g. User:alice", p)
		}
	}
	type opOn struct {
		op  kmsg.ACLOperation
		res aclResource
	}
	var ops []opOn
	res := f.resources()
	switch {
	case f.producer || f.consumer:
		if len(f.operations) > 0 {
			return nil, errors.New("--producer and --consumer choose the operations: leave out --operation")
		}
		if len(f.topics) == 0 {
			return nil, errors.New("--producer and --consumer need --topic")
		}
		for _, t := range f.topics {
			r := aclResource{kmsg.ACLResourceTypeTopic, t}
			if f.producer {
				ops = append(ops, opOn{kmsg.ACLOperationWrite, r}, opOn{kmsg.ACLOperationDescribe, r}, opOn{kmsg.ACLOperationCreate, r})
			}
			if f.consumer {
				ops = append(ops, opOn{kmsg.ACLOperationRead, r}, opOn{kmsg.ACLOperationDescribe, r})
			}
		}
		if f.producer {
			for _, x := range f.txnIDs {
				r := aclResource{kmsg.ACLResourceTypeTransactionalId, x}
				ops = append(ops, opOn{kmsg.ACLOperationWrite, r}, opOn{kmsg.ACLOperationDescribe, r})
			}
			if f.idempotent {
				ops = append(ops, opOn{kmsg.ACLOperationIdempotentWrite, aclResource{kmsg.ACLResourceTypeCluster, "kafka-cluster"}})
			}
		}
		if f.consumer {
			if len(f.groups) == 0 {
				return nil, errors.New("--consumer needs --group (the consumer group to allow READ on)")
			}
			for _, g := range f.groups {
				ops = append(ops, opOn{kmsg.ACLOperationRead, aclResource{kmsg.ACLResourceTypeGroup, g}})
			}
		}
	default:
		if f.idempotent {
			return nil, errors.New("--idempotent goes with --producer")
		}
		if len(res) == 0 {
			return nil, errors.New("name a resource: --topic, --group, --transactional-id, --subject or --cluster")
		}
		names := f.operations
		if len(names) == 0 {
			names = []string{"All"}
		}
		for _, n := range names {
			op, err := kmsg.ParseACLOperation(n)
			if err != nil || op <= kmsg.ACLOperationAny {
				return nil, fmt.Errorf("--operation %q: want Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All", n)
			}
			for _, r := range res {
				ops = append(ops, opOn{op, r})
			}
		}
	}
	hosts := func(h []string) []string {
		if len(h) == 0 {
			return []string{"*"}
		}
		return h
	}
	var out []kmsg.CreateACLsRequestCreation
	add := func(principals, hs []string, perm kmsg.ACLPermissionType) {
		for _, o := range ops {
			for _, p := range principals {
				for _, h := range hosts(hs) {
					c := kmsg.NewCreateACLsRequestCreation()
					c.ResourceType, c.ResourceName, c.ResourcePatternType = o.res.typ, o.res.name, pattern
					if o.res.typ == kmsg.ACLResourceTypeCluster {
						c.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
					}
					c.Principal, c.Host, c.Operation, c.PermissionType = p, h, o.op, perm
					out = append(out, c)
				}
			}
		}
	}
	add(f.allowPrincipals, f.allowHosts, kmsg.ACLPermissionTypeAllow)
	add(f.denyPrincipals, f.denyHosts, kmsg.ACLPermissionTypeDeny)
	return out, nil
}

func entryOf(typ kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType, principal, host string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) aclEntry {
	return aclEntry{Principal: principal, Permission: perm.String(), Operation: op.String(), Host: host,
		ResourceType: metadata.ResourceTypeName(typ), ResourceName: name, PatternType: pattern.String()}
}

func writeACLs(cmd *cobra.Command, cf *clientFlags, entries []aclEntry) error {
	sort.Slice(entries, func(i, j int) bool { return entries[i].key() < entries[j].key() })
	out := cmd.OutOrStdout()
	if cf.json {
		return writeJSON(out, entries)
	}
	withErr := false
	for _, e := range entries {
		withErr = withErr || e.Error != ""
	}
	cols := []string{"resource type", "pattern", "resource", "principal", "permission", "operation", "host"}
	if withErr {
		cols = append(cols, "error")
	}
	t := newTable(out, cols...)
	for _, e := range entries {
		row := []any{e.ResourceType, e.PatternType, e.ResourceName, e.Principal, e.Permission, e.Operation, e.Host}
		if withErr {
			row = append(row, dashIfEmpty(e.Error))
		}
		t.row(row...)
	}
	return t.flush()
}

// aclErr explains the errors an ACL request gets.
func aclErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.SecurityDisabled):
		return fmt.Errorf("%w: the brokers have no authorizer; set authorizer.class.name (docs/security.md, ACLs)", err)
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("%w: changing and listing ACLs needs ALTER (DESCRIBE to list) on the cluster; connect as a super user (super.users)", err)
	case msg != nil && *msg != "":
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

func newACLCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Create, list and delete ACLs (kafka-acls.sh --add, --list, --remove)",
		Args:  cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newACLCreateCmd(cf), newACLListCmd(cf), newACLDeleteCmd(cf))
	return cmd
}

func newACLCreateCmd(cf *clientFlags) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:     "create",
		Aliases: []string{"add"},
		Short:   "Create ACLs (kafka-acls.sh --add)",
		Example: `  berth acl create --allow-principal User:alice --operation Read --operation Describe --topic orders
  berth acl create --allow-principal User:app --producer --topic orders --transactional-id app- --resource-pattern-type prefixed
  berth acl create --allow-principal User:billing --consumer --topic orders --group billing`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			creations, err := f.bindings()
			if err != nil {
				return err
			}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
				req := kmsg.NewPtrCreateACLsRequest()
				req.Creations = creations
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					return cf.explain(err)
				}
				if len(resp.Results) != len(creations) {
					return fmt.Errorf("the broker answered %d results for %d ACLs", len(resp.Results), len(creations))
				}
				var entries []aclEntry
				var failed error
				for i, c := range creations {
					e := entryOf(c.ResourceType, c.ResourceName, c.ResourcePatternType, c.Principal, c.Host, c.Operation, c.PermissionType)
					if err := aclErr(resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage); err != nil {
						e.Error, failed = err.Error(), err
					}
					entries = append(entries, e)
				}
				if err := writeACLs(cmd, cf, entries); err != nil {
					return err
				}
				return failed
			})
		},
	}
	f.register(cmd, "create")
	return cmd
}

// filters are the DescribeAcls/DeleteAcls filters of the flags: each
// resource (or every resource when none is named) with each principal,
// host, operation and permission given (or any).
func (f *aclFlags) filters() ([]kmsg.DeleteACLsRequestFilter, error) {
	pattern, err := parsePattern(f.pattern, true)
	if err != nil {
		return nil, err
	}
	res := f.resources()
	if len(res) == 0 {
		res = []aclResource{{kmsg.ACLResourceTypeAny, ""}}
		if !f.patternSet() {
			pattern = kmsg.ACLResourcePatternTypeAny
		}
	}
	type who struct {
		principal *string
		host      *string
		perm      kmsg.ACLPermissionType
	}
	var whos []who
	ptrs := func(hs []string) []*string {
		if len(hs) == 0 {
			return []*string{nil}
		}
		var out []*string
		for _, h := range hs {
			out = append(out, &h)
		}
		return out
	}
	for _, p := range f.allowPrincipals {
		for _, h := range ptrs(f.allowHosts) {
			whos = append(whos, who{&p, h, kmsg.ACLPermissionTypeAllow})
		}
	}
	for _, p := range f.denyPrincipals {
		for _, h := range ptrs(f.denyHosts) {
			whos = append(whos, who{&p, h, kmsg.ACLPermissionTypeDeny})
		}
	}
	if len(whos) == 0 {
		var p *string
		if f.principal != "" {
			p = &f.principal
		}
		whos = []who{{p, nil, kmsg.ACLPermissionTypeAny}}
	}
	ops := []kmsg.ACLOperation{kmsg.ACLOperationAny}
	if len(f.operations) > 0 {
		ops = nil
		for _, n := range f.operations {
			op, err := kmsg.ParseACLOperation(n)
			if err != nil || op == kmsg.ACLOperationUnknown {
				return nil, fmt.Errorf("--operation %q: want Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All or Any", n)
			}
			ops = append(ops, op)
		}
	}
	var out []kmsg.DeleteACLsRequestFilter
	for _, r := range res {
		for _, w := range whos {
			for _, op := range ops {
				fl := kmsg.NewDeleteACLsRequestFilter()
				fl.ResourceType, fl.ResourcePatternType = r.typ, pattern
				if r.typ != kmsg.ACLResourceTypeAny {
					name := r.name
					fl.ResourceName = &name
				}
				fl.Principal, fl.Host, fl.Operation, fl.PermissionType = w.principal, w.host, op, w.perm
				out = append(out, fl)
			}
		}
	}
	return out, nil
}

// patternSet: --resource-pattern-type was given (list with no resource
// then filters on it; else it lists every pattern type).
func (f *aclFlags) patternSet() bool { return f.pattern != "literal" }

func newACLListCmd(cf *clientFlags) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List ACLs, of every resource or of the named ones (kafka-acls.sh --list)",
		Example: `  berth acl list
  berth acl list --topic orders --resource-pattern-type match
  berth acl list --principal User:alice --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filters, err := f.filters()
			if err != nil {
				return err
			}
			return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
				seen := map[string]bool{}
				entries := []aclEntry{}
				for _, fl := range filters {
					req := kmsg.NewPtrDescribeACLsRequest()
					req.ResourceType, req.ResourceName, req.ResourcePatternType = fl.ResourceType, fl.ResourceName, fl.ResourcePatternType
					req.Principal, req.Host, req.Operation, req.PermissionType = fl.Principal, fl.Host, fl.Operation, fl.PermissionType
					resp, err := req.RequestWith(ctx, cl)
					if err != nil {
						return cf.explain(err)
					}
					if err := aclErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
						return err
					}
					for _, r := range resp.Resources {
						for _, a := range r.ACLs {
							e := entryOf(r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType)
							if !seen[e.key()] {
								seen[e.key()] = true
								entries = append(entries, e)
							}
						}
					}
				}
				return writeACLs(cmd, cf, entries)
			})
		},
	}
	f.register(cmd, "list")
	return cmd
}

func newACLDeleteCmd(cf *clientFlags) *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:     "delete",
		Aliases: []string{"remove", "rm"},
		Short:   "Delete the ACLs matching the flags (kafka-acls.sh --remove) and list what was deleted",
		Example: `  berth acl delete --allow-principal User:alice --operation Read --topic orders
  berth acl delete --topic orders --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.producer || f.consumer || f.idempotent {
				creations, err := f.bindings() // the same ACLs --producer/--consumer create
				if err != nil {
					return err
				}
				return f.deleteExact(cmd, cf, creations)
			}
			if len(f.resources()) == 0 {
				return errors.New("name the resources whose ACLs to delete: --topic, --group, --transactional-id, --subject or --cluster")
			}
			filters, err := f.filters()
			if err != nil {
				return err
			}
			if len(f.allowPrincipals)+len(f.denyPrincipals) == 0 && !f.yes {
				if !stdinIsTerminal(cmd.InOrStdin()) {
					return errors.New("this deletes every ACL of the resources: give --yes, or narrow it with --allow-principal/--deny-principal")
				}
				if !confirm(cmd, "Delete every ACL of these resources?") {
					return errors.New("nothing deleted")
				}
			}
			return deleteACLs(cmd, cf, filters)
		},
	}
	f.register(cmd, "delete")
	return cmd
}

// deleteExact deletes exactly the given bindings.
func (f *aclFlags) deleteExact(cmd *cobra.Command, cf *clientFlags, acls []kmsg.CreateACLsRequestCreation) error {
	var filters []kmsg.DeleteACLsRequestFilter
	for _, c := range acls {
		fl := kmsg.NewDeleteACLsRequestFilter()
		name, principal, host := c.ResourceName, c.Principal, c.Host
		fl.ResourceType, fl.ResourceName, fl.ResourcePatternType = c.ResourceType, &name, c.ResourcePatternType
		fl.Principal, fl.Host, fl.Operation, fl.PermissionType = &principal, &host, c.Operation, c.PermissionType
		filters = append(filters, fl)
	}
	return deleteACLs(cmd, cf, filters)
}

func deleteACLs(cmd *cobra.Command, cf *clientFlags, filters []kmsg.DeleteACLsRequestFilter) error {
	return withClients(cmd, cf, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
		req := kmsg.NewPtrDeleteACLsRequest()
		req.Filters = filters
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return cf.explain(err)
		}
		entries := []aclEntry{}
		var failed error
		for _, r := range resp.Results {
			if err := aclErr(r.ErrorCode, r.ErrorMessage); err != nil {
				failed = err
				continue
			}
			for _, m := range r.MatchingACLs {
				e := entryOf(m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType)
				if err := aclErr(m.ErrorCode, m.ErrorMessage); err != nil {
					e.Error, failed = err.Error(), err
				}
				entries = append(entries, e)
			}
		}
		if failed != nil && len(entries) == 0 {
			return failed
		}
		if err := writeACLs(cmd, cf, entries); err != nil {
			return err
		}
		return failed
	})
}
