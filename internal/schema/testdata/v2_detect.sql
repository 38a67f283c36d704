-- DetectContract: $1 the table, $2 its contract table
SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL,
       EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'status' AND NOT attisdropped)
