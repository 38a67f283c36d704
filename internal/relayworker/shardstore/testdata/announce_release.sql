-- after a release: $1 the table's channel, $2 schema.LeasesReleased
SELECT pg_notify($1, $2)
