package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDSN(t *testing.T) {
	for _, tc := range []struct{ name, dsn, msg string }{
		{"url", "postgres://app:s3cret-pw@db:5432/x", `parse "postgres://app:s3cret-pw@db:5432/x": bad`},
		{"url password alone", "postgres://app:s3cret-pw@db/x", "auth failed for s3cret-pw"},
		{"url escaped", "postgres://app:s3cret%2Fpw@db/x", "got s3cret/pw and s3cret%2Fpw"},
		{"kv", "host=db password=s3cret-pw user=app", "bad option password=s3cret-pw"},
		{"kv quoted", "host=db password='s3cret pw' user=app", "value 's3cret pw' rejected"},
		// From the archive's run history, whose error text anyone reading the table sees.
		{"url user:password echoed", "postgres://relay:s3cretpw@db:5432/app?sslmode=disable", "auth failed for relay:s3cretpw"},
		{"kv quoted, echoed unquoted", "host=db user=relay password='s3cret pw' dbname=app", "bad password s3cret pw"},
		{"whole kv DSN echoed", "host=db user=relay password=s3cretpw dbname=app", "dsn host=db user=relay password=s3cretpw dbname=app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DSN(tc.msg, tc.dsn)
			if strings.Contains(got, "s3cret") {
				t.Errorf("DSN(%q) = %q, still holds the password", tc.msg, got)
			}
			if !strings.Contains(got, Mask) {
				t.Errorf("DSN(%q) = %q, want %q in place of the secret", tc.msg, got, Mask)
			}
		})
	}
}

func TestSecretsLeavesShortValuesAndOtherText(t *testing.T) {
	if got := Secrets("connect to db failed", "db", ""); got != "connect to db failed" {
		t.Errorf("short secrets replaced: %q", got)
	}
	if got := Secrets("token abcd1234 refused", "abcd1234"); got != "token "+Mask+" refused" {
		t.Errorf("got %q", got)
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456..."},
		{"ab€€€€", 8, "ab€..."},
		{"ab€€€€", 7, "ab..."}, // € is 3 bytes: a cut one is dropped, not split
		{"abcdef", 3, "abc"},
		{"abcdef", 0, ""},
	} {
		got := Truncate(tc.in, tc.n)
		if got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if len(got) > max(tc.n, 0) || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q: longer than n or not valid UTF-8", tc.in, tc.n, got)
		}
	}
}
