-- UpgradeState: $1 the upgrade table
SELECT to_regclass($1) IS NOT NULL
