package cli

// Shared plumbing for the client subcommands (topic, produce, consume, bench):
// the common flags, building kgo/kadm clients from them, and turning client
// errors into messages that say what to do next.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	defaultBootstrap = "127.0.0.1:9092"
	envBootstrap     = "BERTH_BOOTSTRAP"
)

// clientFlags are the flags every client command has. They are registered as
// persistent flags on a top-level command so its subcommands inherit them.
type clientFlags struct {
	bootstrap string
	json      bool
	timeout   time.Duration
	clientID  string // "" is berth-cli; set by commands the audit trail marks (berth dlq purge, redrive)

	// commandConfig is Kafka's --command-config (client_security.go).
	commandConfig string
	security      []kgo.Opt

	sasl     saslFlags // sasl_flags.go
	saslOpts []kgo.Opt // from sasl, set by resolve
}

// addClientFlags registers the common client flags on cmd (persistent, so
// `berth topic create` has them as well as `berth topic`).
func addClientFlags(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{}
	fs := cmd.PersistentFlags()
	fs.StringVarP(&f.bootstrap, "bootstrap-server", "b", defaultBootstrap,
		"comma-separated host:port list of brokers to bootstrap from (env "+envBootstrap+")")
	fs.BoolVar(&f.json, "json", false, "machine-readable JSON output")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the cluster on each request")
	fs.StringVar(&f.commandConfig, "command-config", "", "client properties file: security.protocol=SSL and PEM ssl.* files (Kafka's --command-config)")
	addSASLFlags(fs, &f.sasl)
	return f
}

// resolve applies the environment default: BERTH_BOOTSTRAP is used when
// --bootstrap-server was not given on the command line.
func (f *clientFlags) resolve(cmd *cobra.Command) error {
	if fl := cmd.Flags().Lookup("bootstrap-server"); fl != nil && !fl.Changed {
		if v := strings.TrimSpace(os.Getenv(envBootstrap)); v != "" {
			f.bootstrap = v
		}
	}
	if len(f.seeds()) == 0 {
		return errors.New("--bootstrap-server is empty: give at least one host:port")
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", f.timeout)
	}
	var err error
	var fromFile saslFlags
	if f.security, fromFile, err = securityOpts(f.commandConfig); err != nil {
		return err
	}
	f.sasl.fillFrom(cmd, fromFile)
	f.saslOpts, err = f.sasl.saslOpts(cmd)
	return err
}

// seeds splits the bootstrap list.
func (f *clientFlags) seeds() []string {
	var out []string
	for s := range strings.SplitSeq(f.bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// baseOpts are the kgo options every client command uses.
func (f *clientFlags) baseOpts() []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(f.seeds()...),
		kgo.ClientID(cmp.Or(f.clientID, "berth-cli")),
		kgo.DialTimeout(min(f.timeout, 10*time.Second)),
		kgo.RetryTimeout(f.timeout),
	}, append(f.security, f.saslOpts...)...)
}

// connect builds a kgo client with the common options plus extra, and pings
// the cluster so an unreachable bootstrap server fails fast with a clear
// message rather than deep inside a produce or a poll.
func (f *clientFlags) connect(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append(f.baseOpts(), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("client options: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, f.explain(err)
	}
	return cl, nil
}

// admin returns a connected kadm client whose requests carry --timeout.
// Closing the kadm client closes the underlying kgo client.
func (f *clientFlags) admin(ctx context.Context) (*kadm.Client, error) {
	_, adm, err := f.clients(ctx)
	return adm, err
}

// clients connects and returns the kgo client with an admin client over it
// (requests time out after --timeout).
func (f *clientFlags) clients(ctx context.Context) (*kgo.Client, *kadm.Client, error) {
	cl, err := f.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(min(f.timeout, time.Duration(1<<31-1)*time.Millisecond).Milliseconds()))
	return cl, adm, nil
}

// withClients is withAdmin handing fn the kgo client as well, for the
// requests kadm does not make as the commands need them.
func withClients(cmd *cobra.Command, cf *clientFlags, fn func(context.Context, *kgo.Client, *kadm.Client) error) error {
	if err := cf.resolve(cmd); err != nil {
		return err
	}
	ctx := cmd.Context()
	cl, adm, err := cf.clients(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	return fn(ctx, cl, adm)
}

// requireGroups fails, with advice, when the cluster cannot serve a consumer
// group: without this check kgo would retry joining forever while the
// command printed nothing.
func (f *clientFlags) requireGroups(ctx context.Context, cl *kgo.Client, group string) error {
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return f.explain(err)
	}
	var missing []string
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil || len(missing) > 0 {
			return
		}
		has := func(k kmsg.Key) bool { _, ok := v.KeyMaxVersion(k.Int16()); return ok }
		for _, k := range []kmsg.Key{kmsg.FindCoordinator, kmsg.OffsetCommit, kmsg.OffsetFetch} {
			if !has(k) {
				missing = append(missing, k.Name())
			}
		}
		if !has(kmsg.JoinGroup) && !has(kmsg.ConsumerGroupHeartbeat) {
			missing = append(missing, kmsg.JoinGroup.Name())
		}
	})
	if len(missing) > 0 {
		return fmt.Errorf("--group %s: the broker does not support consumer groups (no %s); consume without --group", group, strings.Join(missing, ", "))
	}
	return nil
}

// explain rewrites an error from the client libraries into one that tells the
// user what to do. Errors it does not recognise pass through unchanged.
func (f *clientFlags) explain(err error) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return kafkaError{err: err, ke: ke}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("cannot resolve %s: check the host in --bootstrap-server: %w", f.bootstrap, err)
	}
	var opErr *net.OpError
	if (errors.As(err, &opErr) && opErr.Op == "dial") || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot reach %s: is `berth serve` running? (--bootstrap-server): %w", f.bootstrap, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer from %s within %s: is the cluster up? (--timeout, --bootstrap-server): %w", f.bootstrap, f.timeout, err)
	}
	return err
}

// kafkaError is a Kafka error code returned by the cluster, printed with its
// protocol name and a hint on what to do about it.
type kafkaError struct {
	err error // the full error, possibly wrapped
	ke  *kerr.Error
}

func (e kafkaError) Error() string {
	msg := e.err.Error()
	if h := kerrHint(e.ke); h != "" {
		msg += " (" + h + ")"
	}
	return msg
}

func (e kafkaError) Unwrap() error { return e.err }

// brokerMessageError is a Kafka error code with the broker's own message
// (the ErrorMessage field of newer responses) in place of the generic
// description.
type brokerMessageError struct {
	err error
	msg string
}

func (e *brokerMessageError) Error() string { return kerrName(e.err) + ": " + e.msg }
func (e *brokerMessageError) Unwrap() error { return e.err }

// withBrokerMessage attaches a broker's error message to err, dropping a
// repeat of err's own text that some brokers put in front of it.
func withBrokerMessage(err error, msg string) error {
	for _, prefix := range []string{err.Error(), kerrName(err)} {
		msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(msg, prefix), ":"))
	}
	if msg == "" {
		return err
	}
	return &brokerMessageError{err: err, msg: msg}
}

// kerrHint is the advice printed next to a Kafka error code.
func kerrHint(ke *kerr.Error) string {
	switch ke {
	case kerr.UnknownTopicOrPartition:
		return "the topic does not exist: create it with `berth topic create NAME`, or check the name with `berth topic list`"
	case kerr.TopicAlreadyExists:
		return "pass --if-not-exists to ignore an existing topic"
	case kerr.InvalidTopicException:
		return "topic names are 1-249 characters of [a-zA-Z0-9._-], and not . or .."
	case kerr.InvalidPartitions:
		return "--partitions must be at least 1, and more than the current count when altering"
	case kerr.InvalidReplicationFactor:
		return "--replication-factor (without it, the broker's default.replication.factor) must be between 1 and the number of live brokers"
	case kerr.InvalidReplicaAssignment:
		return "the replica assignment names brokers that do not exist"
	case kerr.InvalidConfig:
		return "check the config name and value; see docs/configuration.md"
	case kerr.PolicyViolation:
		return "the broker's policy refused the request"
	case kerr.TopicDeletionDisabled:
		return "the broker has delete.topic.enable=false"
	case kerr.SaslAuthenticationFailed:
		return "check --sasl-username and --sasl-password (or BERTH_SASL_USERNAME and BERTH_SASL_PASSWORD) and --sasl-mechanism"
	case kerr.UnsupportedSaslMechanism:
		return "the listener does not enable this --sasl-mechanism (sasl.enabled.mechanisms)"
	case kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.GroupAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed:
		return "the principal lacks an ACL for this operation"
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return "raise the topic's max.message.bytes with `berth topic alter TOPIC --config max.message.bytes=N`, or send smaller records"
	case kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend:
		return "fewer in-sync replicas than min.insync.replicas; use --acks 1 or bring replicas back"
	case kerr.InvalidRequiredAcks:
		return "--acks must be all, 1 or 0"
	case kerr.UnsupportedCompressionType:
		return "the broker or topic does not accept this --compression"
	case kerr.UnsupportedVersion:
		return "the broker does not support this request version"
	case kerr.NotController, kerr.NotLeaderForPartition, kerr.LeaderNotAvailable, kerr.CoordinatorNotAvailable,
		kerr.CoordinatorLoadInProgress, kerr.NotCoordinator:
		return "the cluster is electing a leader; retry shortly"
	case kerr.OffsetOutOfRange:
		return "the offset is outside the partition's log; see `berth topic describe` for the start and end offsets"
	case kerr.RequestTimedOut:
		return "the broker did not finish in time; raise --timeout"
	case kerr.InvalidGroupID:
		return "--group must not be empty"
	}
	return ""
}

// kerrName returns the protocol name of a Kafka error code in err
// (e.g. UNKNOWN_TOPIC_OR_PARTITION), or the error's text otherwise.
func kerrName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// withAdmin resolves the common flags, connects an admin client and runs fn.
func withAdmin(cmd *cobra.Command, cf *clientFlags, fn func(context.Context, *kadm.Client) error) error {
	return withClients(cmd, cf, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error { return fn(ctx, adm) })
}
