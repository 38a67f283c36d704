-- an example
SELECT 1
