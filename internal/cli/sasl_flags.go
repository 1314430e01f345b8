package cli

// SASL credentials for the client commands: --sasl-mechanism,
// --sasl-username and --sasl-password (or the environment variables
// BERTH_SASL_MECHANISM, BERTH_SASL_USERNAME, BERTH_SASL_PASSWORD, so a
// password stays out of the shell history), for a SASL_PLAINTEXT
// listener.

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type saslFlags struct {
	mechanism, username, password string
}

func addSASLFlags(fs *pflag.FlagSet, f *saslFlags) {
	fs.StringVar(&f.mechanism, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (env BERTH_SASL_MECHANISM; empty: no SASL)")
	fs.StringVar(&f.username, "sasl-username", "", "SASL user name (env BERTH_SASL_USERNAME)")
	fs.StringVar(&f.password, "sasl-password", "", "SASL password, or the token for OAUTHBEARER (env BERTH_SASL_PASSWORD, preferred)")
}

// fillFrom takes the --command-config file's SASL settings for the
// flags not given on the command line (nor by their variables).
func (f *saslFlags) fillFrom(cmd *cobra.Command, file saslFlags) {
	take := func(flag, env string, v *string, fv string) {
		if fl := cmd.Flags().Lookup(flag); fl != nil && fl.Changed || os.Getenv(env) != "" || fv == "" {
			return
		}
		*v = fv
	}
	take("sasl-mechanism", "BERTH_SASL_MECHANISM", &f.mechanism, file.mechanism)
	take("sasl-username", "BERTH_SASL_USERNAME", &f.username, file.username)
	take("sasl-password", "BERTH_SASL_PASSWORD", &f.password, file.password)
}

// saslOpts returns the kgo option authenticating with the flags (or their
// environment variables); none when no mechanism is set.
func (f *saslFlags) saslOpts(cmd *cobra.Command) ([]kgo.Opt, error) {
	env := func(flag, name string, v *string) {
		if fl := cmd.Flags().Lookup(flag); fl != nil && !fl.Changed {
			if e := os.Getenv(name); e != "" {
				*v = e
			}
		}
	}
	env("sasl-mechanism", "BERTH_SASL_MECHANISM", &f.mechanism)
	env("sasl-username", "BERTH_SASL_USERNAME", &f.username)
	env("sasl-password", "BERTH_SASL_PASSWORD", &f.password)
	mech := strings.ToUpper(strings.TrimSpace(f.mechanism))
	if mech == "" {
		return nil, nil
	}
	if f.password == "" || (mech != "OAUTHBEARER" && f.username == "") {
		return nil, fmt.Errorf("--sasl-mechanism %s needs --sasl-username and --sasl-password (or BERTH_SASL_USERNAME and BERTH_SASL_PASSWORD)", mech)
	}
	switch mech {
	case "PLAIN":
		return []kgo.Opt{kgo.SASL(plain.Auth{User: f.username, Pass: f.password}.AsMechanism())}, nil
	case "SCRAM-SHA-256":
		return []kgo.Opt{kgo.SASL(scram.Auth{User: f.username, Pass: f.password}.AsSha256Mechanism())}, nil
	case "SCRAM-SHA-512":
		return []kgo.Opt{kgo.SASL(scram.Auth{User: f.username, Pass: f.password}.AsSha512Mechanism())}, nil
	case "OAUTHBEARER":
		tok := f.password
		return []kgo.Opt{kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: tok}, nil }))}, nil
	}
	return nil, fmt.Errorf("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", f.mechanism)
}
