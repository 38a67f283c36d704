-- after a release, or a round that left the worker under its share: $1 the table's channel, $2 schema.LeasesReleased or schema.LeasesWanted
SELECT pg_notify($1, $2)
