-- VerifyV2's catalog facts: $1 the table, $2 its sequence
SELECT COALESCE((SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
         JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
         WHERE d.adrelid = to_regclass($1) AND a.attname = 'txid' AND NOT a.attisdropped), ''),
       COALESCE((SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
         JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
         WHERE d.adrelid = to_regclass($1) AND a.attname = 'seq' AND NOT a.attisdropped), ''),
       COALESCE((SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
         JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
         WHERE d.adrelid = to_regclass($1) AND a.attname = 'shard' AND NOT a.attisdropped), ''),
       EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'shard' AND attgenerated = 's' AND NOT attisdropped),
       COALESCE(to_regclass($2)::text, ''),
       COALESCE((SELECT seqcache FROM pg_sequence WHERE seqrelid = to_regclass($2)), 0),
       EXISTS (SELECT FROM "public"."outbox_event"),
       EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass($3) AND attname = 'seqs' AND NOT attisdropped),
       EXISTS (SELECT FROM pg_class WHERE oid = to_regclass('"public"."outbox_event_shard"') AND relkind = 'v')
         AND to_regclass('"public"."outbox_event_cursor"') IS NOT NULL
         AND to_regclass('"public"."outbox_event_lease"') IS NOT NULL
         AND to_regclass('"public"."outbox_event_token"') IS NOT NULL
