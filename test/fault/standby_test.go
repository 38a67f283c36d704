package fault

import (
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outbox-operator/outbox-operator/internal/testenv/relayproc"
	"github.com/outbox-operator/outbox-operator/internal/testenv/relaytest"
)

// A real streaming hot standby of the suite's server (not a stand-in function): the
// relay and migrate refuse it with one clear line and exit 1, and nothing changes on
// the primary or in Kafka.
func TestHotStandbyRefused(t *testing.T) {
	dsn, db := relaytest.NewDB(t)
	tp := newTopic(t, "standby")
	const n = 5
	relaytest.Insert(t, db, relaytest.Many(tp, tp, n)...)
	sb, err := relaytest.PG.StartStandby()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop()
	dbName := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	sbDSN := sb.DSN(dbName)
	standby, err := sql.Open("postgres", sbDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close()
	// The standby has the migrated table and the rows, so only being a standby is wrong.
	relaytest.Eventually(t, 20*time.Second, "rows replicated to the standby", func() bool {
		return mustCount(t, standby, `SELECT count(*) FROM public.outbox_event`) == n
	})

	env := []string{"PATH=" + os.Getenv("PATH"), "OUTBOX_DSN=" + sbDSN, "KAFKA_BROKERS=" + broker.AddrList()}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"relay", "--metrics-addr=", "--health-addr="}, "hot standby"},
		// migrate checks pg_is_in_recovery() first, like the relay, rather than leaving
		// it to PostgreSQL's "cannot set transaction read-write mode during recovery".
		{[]string{"migrate"}, "hot standby"},
	} {
		code, stderr := relayproc.Run(t, bin, env, c.args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "relayworker: ") || !strings.Contains(lines[0], c.want) {
			t.Errorf("relayworker %s on a hot standby: exit %d, stderr:\n%s\nwant exit 1 and one line mentioning %q", c.args[0], code, stderr, c.want)
		} else {
			t.Logf("relayworker %s: %s", c.args[0], lines[0])
		}
		if strings.Contains(stderr, sbDSN) {
			t.Errorf("relayworker %s printed the DSN", c.args[0])
		}
	}
	untouched := `SELECT count(*) FROM public.outbox_event
		WHERE status = 'PENDING' AND owner_token IS NULL AND retry_count = 0 AND updated_at = created_at`
	if got := mustCount(t, db, untouched); got != n {
		t.Errorf("%d of %d rows untouched on the primary", got, n)
	}
	if got := broker.Count(tp); got != 0 {
		t.Errorf("%d records reached Kafka from a standby", got)
	}
}
