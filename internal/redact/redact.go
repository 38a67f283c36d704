// Package redact keeps secrets out of logs, status fields and tables, and cuts text
// to a size PostgreSQL and the Kubernetes API accept. It is the one place for both
// rules: the operator and the worker write error text where many people can read it.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// minSecret is the shortest value replaced: shorter ones ("a", "db") would mangle
// ordinary words in the message without hiding anything worth hiding.
const minSecret = 4

// Mask is what a removed secret reads as.
const Mask = "[redacted]"

// passwordKV finds password=... in a key/value DSN (quoted or not).
var passwordKV = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// Secrets removes every secret (at least minSecret bytes long) from msg.
func Secrets(msg string, secrets ...string) string {
	for _, s := range secrets {
		if len(s) >= minSecret {
			msg = strings.ReplaceAll(msg, s, Mask)
		}
	}
	return msg
}

// DSN removes a database DSN, and the password inside it in either DSN form (URL or
// key/value), from msg. Drivers do not normally echo either, but a parse error can
// quote the whole DSN.
func DSN(msg, dsn string) string {
	return Secrets(msg, dsnSecrets(dsn)...)
}

// dsnSecrets lists the DSN itself first, then each spelling of its password.
func dsnSecrets(dsn string) []string {
	secrets := []string{dsn}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p, url.QueryEscape(p))
		}
	}
	for _, m := range passwordKV.FindAllStringSubmatch(dsn, -1) {
		secrets = append(secrets, m[1], strings.Trim(m[1], "'"))
	}
	return secrets
}

// Truncate cuts s to at most n bytes, ending in "..." when it cut. It never splits a
// UTF-8 sequence: PostgreSQL rejects the half rune, and the API server stores it
// mangled.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 3 {
		return strings.ToValidUTF8(s[:max(n, 0)], "")
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
