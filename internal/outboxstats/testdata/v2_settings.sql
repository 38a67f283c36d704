-- Read of a v2 table: first after the contract, for the rest of the transaction
SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true), set_config('max_parallel_workers_per_gather', '0', true), set_config('jit', 'off', true)
