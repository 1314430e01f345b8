package handler

import (
	"strings"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/server"
)

// PrincipalHook maps a request's client id to a principal; ok=false leaves
// the connection as it is.
type PrincipalHook func(clientID string) (p auth.Principal, ok bool)

// SetTestPrincipals installs a hook that gives a connection with no
// identity yet the principal its first request's client id maps to. Only
// tests install one (authorization and quota tests that need principals
// without a SASL exchange); no setting reaches it. nil removes it.
func (b *Broker) SetTestPrincipals(fn PrincipalHook) {
	if fn == nil {
		b.testPrincipals.Store(nil)
		return
	}
	b.testPrincipals.Store(&fn)
}

// applyTestPrincipal runs the SetTestPrincipals hook for req.
func (b *Broker) applyTestPrincipal(req *server.Request) {
	f := b.testPrincipals.Load()
	if f == nil || req.Conn == nil || req.Conn.Identity() != nil || strings.HasPrefix(req.Conn.Protocol, "SASL_") {
		return // a SASL listener's connections authenticate
	}
	if p, ok := (*f)(req.ClientID); ok {
		req.Conn.SetIdentity(server.Identity{Principal: p})
	}
}
