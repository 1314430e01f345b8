// Package auth holds what a shared cluster needs to know who is asking and
// what they may do: principals (principal.go), the authorizer interface
// the handlers call before they act (authorizer.go) and the audit trail's
// event and sink (audit.go). The mechanisms behind them (SASL, the ACL
// authorizer, quotas, the audit writer) live in files of their own here;
// the connection-level state (listener, security protocol, the
// authenticated principal) lives on server.Conn.
package auth
