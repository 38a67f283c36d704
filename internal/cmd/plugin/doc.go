// Package plugin is `kubectl outbox` (cmd/kubectl-outbox): status of every
// outbox resource in a namespace, the trace of one event through the outbox table,
// its archive, the replay audit and the consumers' databases, and declarative
// dead-letter replays. docs/kubectl-outbox.md is the user's guide.
//
// Two rules shape everything here. The plugin acts with the user's own credentials:
// it reads a pipeline's DSN Secret with the user's RBAC, never through the operator.
// And nothing secret is ever printed: DSNs and passwords are redacted from every
// error, and errors are one line that names what to fix.
package plugin
