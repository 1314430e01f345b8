package cli

// `berth schema`: the schema registry through its REST API (the
// Confluent-compatible one every node serves on its HTTP listener), with
// franz-go's registry client, as any application would use it.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/sr"
)

func init() { clientCommands = append(clientCommands, newSchemaCmd) }

// registryFlags are how a schema command reaches the registry.
type registryFlags struct {
	url            string
	ca, cert, key  string
	user, password string
	json           bool
}

func newSchemaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schema",
		Aliases: []string{"schemas"},
		Short:   "Register, read, check and delete schemas in the schema registry",
		Long: `Drive the schema registry every node serves on its HTTP listener
(http.listener, 127.0.0.1:8081 by default), through its Confluent-compatible
REST API. Give the registry with --registry or BERTH_SCHEMA_REGISTRY_URL.`,
		Args: cobra.NoArgs,
	}
	rf := &registryFlags{}
	pf := cmd.PersistentFlags()
	def := os.Getenv("BERTH_SCHEMA_REGISTRY_URL")
	if def == "" {
		def = "http://127.0.0.1:8081"
	}
	pf.StringVar(&rf.url, "registry", def, "schema registry URL (env BERTH_SCHEMA_REGISTRY_URL)")
	pf.StringVar(&rf.ca, "registry-ca", "", "PEM CA certificates to trust for an https registry")
	pf.StringVar(&rf.cert, "registry-cert", "", "PEM client certificate, for a registry with http.auth=mtls")
	pf.StringVar(&rf.key, "registry-key", "", "PEM key of --registry-cert")
	pf.StringVar(&rf.user, "registry-user", "", "HTTP basic authentication user")
	pf.StringVar(&rf.password, "registry-password", "", "HTTP basic authentication password")
	pf.BoolVar(&rf.json, "json", false, "print JSON instead of a table")
	cmd.AddCommand(newSchemaListCmd(rf), newSchemaGetCmd(rf), newSchemaRegisterCmd(rf), newSchemaCheckCmd(rf),
		newSchemaDeleteCmd(rf), newSchemaConfigCmd(rf))
	return cmd
}

// client returns a registry client for the flags.
func (rf *registryFlags) client() (*sr.Client, error) {
	opts := []sr.ClientOpt{sr.URLs(rf.url), sr.UserAgent("berth-cli")}
	if rf.ca != "" || rf.cert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if rf.ca != "" {
			pem, err := os.ReadFile(rf.ca)
			if err != nil {
				return nil, fmt.Errorf("--registry-ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--registry-ca %s holds no PEM certificate", rf.ca)
			}
		}
		if rf.cert != "" {
			c, err := tls.LoadX509KeyPair(rf.cert, rf.key)
			if err != nil {
				return nil, fmt.Errorf("--registry-cert/--registry-key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{c}
		}
		opts = append(opts, sr.HTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}))
	}
	if rf.user != "" {
		opts = append(opts, sr.BasicAuth(rf.user, rf.password))
	}
	return sr.NewClient(opts...)
}

// explain adds what to do to a registry error.
func (rf *registryFlags) explain(err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return fmt.Errorf("schema registry: %s (error %d)", re.Message, re.ErrorCode)
	}
	return fmt.Errorf("schema registry at %s: %w (is the broker running, and its http.listener there? set --registry)", rf.url, err)
}

func parseVersion(s string) (int, error) {
	if s == "latest" || s == "" {
		return -1, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("version %q: want a number from 1 or latest", s)
	}
	return v, nil
}

func schemaType(s string) (sr.SchemaType, error) {
	switch strings.ToUpper(s) {
	case "", "AVRO":
		return sr.TypeAvro, nil
	case "JSON":
		return sr.TypeJSON, nil
	case "PROTOBUF":
		return sr.TypeProtobuf, nil
	}
	return 0, fmt.Errorf("--type %q: want AVRO, JSON or PROTOBUF", s)
}

// readSchema reads a schema from --file (- for standard input).
func readSchema(cmd *cobra.Command, file, typ string, refs []string) (sr.Schema, error) {
	var b []byte
	var err error
	switch file {
	case "":
		return sr.Schema{}, errors.New("give the schema with --file (- for standard input)")
	case "-":
		b, err = io.ReadAll(cmd.InOrStdin())
	default:
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return sr.Schema{}, fmt.Errorf("--file: %w", err)
	}
	t, err := schemaType(typ)
	if err != nil {
		return sr.Schema{}, err
	}
	s := sr.Schema{Schema: string(b), Type: t}
	for _, r := range refs {
		name, sv, ok := strings.Cut(r, "=")
		subject, ver, ok2 := strings.Cut(sv, ":")
		v, err := strconv.Atoi(ver)
		if !ok || !ok2 || err != nil {
			return sr.Schema{}, fmt.Errorf("--reference %q: want name=subject:version", r)
		}
		s.References = append(s.References, sr.SchemaReference{Name: name, Subject: subject, Version: v})
	}
	return s, nil
}

func newSchemaListCmd(rf *registryFlags) *cobra.Command {
	var prefix string
	var deleted bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List subjects with their latest version and schema id",
		Example: `  berth schema list
  berth schema list --prefix orders --deleted --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := rf.client()
			if err != nil {
				return err
			}
			ctx := sr.WithParams(cmd.Context(), sr.LatestOnly, sr.SubjectPrefix(prefix))
			if deleted {
				ctx = sr.WithParams(ctx, sr.ShowDeleted)
			}
			all, err := cl.AllSchemas(ctx)
			if err != nil {
				return rf.explain(err)
			}
			type row struct {
				Subject  string `json:"subject"`
				Versions []int  `json:"versions"`
				Latest   int    `json:"latest_version"`
				ID       int    `json:"id"`
				Type     string `json:"schema_type"`
			}
			rows := []row{}
			for _, s := range all {
				vs, err := cl.SubjectVersions(ctx, s.Subject)
				if err != nil {
					vs = []int{s.Version}
				}
				rows = append(rows, row{s.Subject, vs, s.Version, s.ID, s.Type.String()})
			}
			if rf.json {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			tb := newTable(cmd.OutOrStdout(), "subject", "versions", "latest", "id", "type")
			for _, r := range rows {
				tb.row(r.Subject, len(r.Versions), r.Latest, r.ID, r.Type)
			}
			return tb.flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only subjects starting with this")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "include soft-deleted subjects")
	return cmd
}

func newSchemaGetCmd(rf *registryFlags) *cobra.Command {
	var version string
	var id int
	cmd := &cobra.Command{
		Use:   "get [subject]",
		Short: "Print a subject's version (latest by default) or a schema by id",
		Example: `  berth schema get orders-value
  berth schema get orders-value --version 2 --json
  berth schema get --id 7`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := rf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var ss sr.SubjectSchema
			switch {
			case id > 0 && len(args) == 0:
				s, err := cl.SchemaByID(ctx, id)
				if err != nil {
					return rf.explain(err)
				}
				ss = sr.SubjectSchema{ID: id, Schema: s}
				if subs, err := cl.SubjectsByID(ctx, id); err == nil && len(subs) > 0 {
					ss.Subject = strings.Join(subs, ",")
				}
			case len(args) == 1 && id == 0:
				v, err := parseVersion(version)
				if err != nil {
					return err
				}
				if ss, err = cl.SchemaByVersion(ctx, args[0], v); err != nil {
					return rf.explain(err)
				}
			default:
				return errors.New("give a subject (with --version) or --id, not both")
			}
			if rf.json {
				return writeJSON(cmd.OutOrStdout(), ss)
			}
			w := cmd.OutOrStdout()
			tb := newTable(w, "subject", "version", "id", "type", "references")
			refs := make([]string, len(ss.References))
			for i, r := range ss.References {
				refs[i] = fmt.Sprintf("%s=%s:%d", r.Name, r.Subject, r.Version)
			}
			tb.row(dashIfEmpty(ss.Subject), dashIfZero(ss.Version), ss.ID, ss.Type.String(), dashIfEmpty(strings.Join(refs, " ")))
			if err := tb.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintln(w, ss.Schema.Schema)
			return err
		},
	}
	cmd.Flags().StringVar(&version, "version", "latest", "version number, or latest")
	cmd.Flags().IntVar(&id, "id", 0, "a schema id instead of a subject")
	return cmd
}

func dashIfZero(v int) string {
	if v == 0 {
		return "-"
	}
	return strconv.Itoa(v)
}

func newSchemaRegisterCmd(rf *registryFlags) *cobra.Command {
	var file, typ string
	var refs []string
	var normalize bool
	cmd := &cobra.Command{
		Use:   "register <subject>",
		Short: "Register a schema under a subject (refused when incompatible with the subject's level)",
		Example: `  berth schema register orders-value --file order.avsc
  berth schema register orders-value --type JSON --file order.schema.json
  berth schema register orders-value --file order.avsc --reference Customer=customer-value:1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := readSchema(cmd, file, typ, refs)
			if err != nil {
				return err
			}
			cl, err := rf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if normalize {
				ctx = sr.WithParams(ctx, sr.Normalize)
			}
			ss, err := cl.CreateSchema(ctx, args[0], s)
			if err != nil {
				return rf.explain(err)
			}
			if rf.json {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"subject": ss.Subject, "version": ss.Version, "id": ss.ID})
			}
			tb := newTable(cmd.OutOrStdout(), "subject", "version", "id")
			tb.row(ss.Subject, ss.Version, ss.ID)
			return tb.flush()
		},
	}
	schemaFileFlags(cmd, &file, &typ, &refs)
	cmd.Flags().BoolVar(&normalize, "normalize", false, "normalise the schema before registering (normalize=true)")
	return cmd
}

func schemaFileFlags(cmd *cobra.Command, file, typ *string, refs *[]string) {
	cmd.Flags().StringVarP(file, "file", "f", "", "the schema's file (- for standard input)")
	cmd.Flags().StringVar(typ, "type", "AVRO", "schema type: AVRO, JSON or PROTOBUF")
	cmd.Flags().StringArrayVar(refs, "reference", nil, "a reference, name=subject:version (repeatable)")
}

func newSchemaCheckCmd(rf *registryFlags) *cobra.Command {
	var file, typ, version string
	var refs []string
	cmd := &cobra.Command{
		Use:   "check <subject>",
		Short: "Check a schema against a subject's versions at its compatibility level, without registering it",
		Long: `Check a schema against the subject's version (latest by default; every
version the level covers with --version all) and print whether it is
compatible and why not. Exits 1 when it is not.`,
		Example: `  berth schema check orders-value --file order-v3.avsc
  berth schema check orders-value --file order-v3.avsc --version all --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := readSchema(cmd, file, typ, refs)
			if err != nil {
				return err
			}
			cl, err := rf.client()
			if err != nil {
				return err
			}
			v := -2 // all versions: POST .../versions
			if version != "all" {
				if v, err = parseVersion(version); err != nil {
					return err
				}
			}
			ctx := sr.WithParams(cmd.Context(), sr.Verbose)
			res, err := cl.CheckCompatibility(ctx, args[0], v, s)
			if err != nil {
				return rf.explain(err)
			}
			if rf.json {
				if err := writeJSON(cmd.OutOrStdout(), map[string]any{"subject": args[0], "is_compatible": res.Is, "messages": res.Messages}); err != nil {
					return err
				}
			} else {
				tb := newTable(cmd.OutOrStdout(), "subject", "compatible", "reason")
				reason := "-"
				if len(res.Messages) > 0 {
					reason = strings.Join(res.Messages, "; ")
				}
				tb.row(args[0], res.Is, reason)
				if err := tb.flush(); err != nil {
					return err
				}
			}
			if !res.Is {
				return fmt.Errorf("the schema is not compatible with %s", args[0])
			}
			return nil
		},
	}
	schemaFileFlags(cmd, &file, &typ, &refs)
	cmd.Flags().StringVar(&version, "version", "latest", "version to check against: a number, latest or all")
	return cmd
}

func newSchemaDeleteCmd(rf *registryFlags) *cobra.Command {
	var version string
	var permanent bool
	cmd := &cobra.Command{
		Use:   "delete <subject>",
		Short: "Delete a subject or one of its versions (soft; --permanent after a soft delete)",
		Example: `  berth schema delete orders-value --version 3
  berth schema delete orders-value
  berth schema delete orders-value --permanent`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := rf.client()
			if err != nil {
				return err
			}
			how := sr.SoftDelete
			if permanent {
				how = sr.HardDelete
			}
			var versions []int
			if version != "" {
				v, err := parseVersion(version)
				if err != nil {
					return err
				}
				if v < 0 {
					ss, err := cl.SchemaByVersion(sr.WithParams(cmd.Context(), sr.ShowDeleted), args[0], -1)
					if err != nil {
						return rf.explain(err)
					}
					v = ss.Version
				}
				if err := cl.DeleteSchema(cmd.Context(), args[0], v, how); err != nil {
					return rf.explain(err)
				}
				versions = []int{v}
			} else if versions, err = cl.DeleteSubject(cmd.Context(), args[0], how); err != nil {
				return rf.explain(err)
			}
			if rf.json {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"subject": args[0], "deleted_versions": versions, "permanent": permanent})
			}
			tb := newTable(cmd.OutOrStdout(), "subject", "deleted versions", "permanent")
			tb.row(args[0], strings.Trim(fmt.Sprint(versions), "[]"), permanent)
			return tb.flush()
		},
	}
	cmd.Flags().StringVar(&version, "version", "", "delete only this version (a number or latest)")
	cmd.Flags().BoolVar(&permanent, "permanent", false, "delete for good what was soft-deleted before (permanent=true)")
	return cmd
}

func newSchemaConfigCmd(rf *registryFlags) *cobra.Command {
	var set string
	var reset bool
	cmd := &cobra.Command{
		Use:   "config [subject]",
		Short: "Show or set the compatibility level, global or of a subject",
		Example: `  berth schema config
  berth schema config orders-value --set FULL_TRANSITIVE
  berth schema config orders-value --reset`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if set != "" && reset {
				return errors.New("give --set or --reset, not both")
			}
			cl, err := rf.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var res []sr.CompatibilityResult
			switch {
			case set != "":
				var lvl sr.CompatibilityLevel
				if err := lvl.UnmarshalText([]byte(strings.ToUpper(set))); err != nil {
					return fmt.Errorf("--set %q: want NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL or FULL_TRANSITIVE", set)
				}
				res = cl.SetCompatibility(ctx, sr.SetCompatibility{Level: lvl}, args...)
			case reset:
				res = cl.ResetCompatibility(ctx, args...)
			default:
				ctx = sr.WithParams(ctx, sr.DefaultToGlobal)
				res = cl.Compatibility(ctx, args...)
			}
			type row struct {
				Subject string `json:"subject"`
				Level   string `json:"compatibility_level"`
			}
			var rows []row
			for _, r := range res {
				if r.Err != nil {
					return rf.explain(r.Err)
				}
				subject := r.Subject
				if subject == "" {
					subject = "(global)"
				}
				rows = append(rows, row{subject, r.Level.String()})
			}
			if rf.json {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			tb := newTable(cmd.OutOrStdout(), "subject", "compatibility")
			for _, r := range rows {
				tb.row(r.Subject, r.Level)
			}
			return tb.flush()
		},
	}
	cmd.Flags().StringVar(&set, "set", "", "set the level")
	cmd.Flags().BoolVar(&reset, "reset", false, "remove the subject's own level (the global one applies), or the global one (back to schema.compatibility.level)")
	return cmd
}
