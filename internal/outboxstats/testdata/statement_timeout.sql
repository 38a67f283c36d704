-- Read and ReadLastArchiveRun: first in their read-only transaction
SET LOCAL statement_timeout = 3000
