-- name: RunLeaseRequest :one
-- Asks for a run of a key: takes it for owner until lease_until when no
-- live run holds it (a trailing run left behind is covered by this one),
-- else records the request as the holder's trailing run. One statement
-- under the row's lock, so a run that ends at the same moment either sees
-- the request or lets go before it. Reports whether owner holds the key.
INSERT INTO run_leases (tenant_id, kind, key, owner, lease_until)
VALUES (@tenant_id, @kind, @key, @owner, @lease_until)
ON CONFLICT (tenant_id, kind, key) DO UPDATE SET
    owner = CASE WHEN run_leases.lease_until IS NULL OR run_leases.lease_until < now()
                 THEN excluded.owner ELSE run_leases.owner END,
    lease_until = CASE WHEN run_leases.lease_until IS NULL OR run_leases.lease_until < now()
                       THEN excluded.lease_until ELSE run_leases.lease_until END,
    pending = NOT (run_leases.lease_until IS NULL OR run_leases.lease_until < now()),
    updated_at = now()
RETURNING (owner = @owner)::bool AS claimed;

-- name: RunLeaseAdopt :execrows
-- Takes, for owner until lease_until, a key whose lease ran out (its
-- run's worker died or stalled mid-run, pending or not) or whose trailing
-- run waits behind a lease that was released.
UPDATE run_leases SET owner = @owner, lease_until = @lease_until, pending = false, updated_at = now()
WHERE tenant_id = @tenant_id AND kind = @kind AND key = @key
  AND (lease_until < now() OR (pending AND lease_until IS NULL));

-- name: RunLeaseRenew :execrows
UPDATE run_leases SET lease_until = @lease_until, updated_at = now()
WHERE tenant_id = @tenant_id AND kind = @kind AND key = @key AND owner = @owner AND lease_until IS NOT NULL;

-- name: RunLeaseFinish :many
-- Ends owner's run: when requests arrived meanwhile, owner keeps the key
-- for the trailing run (renewed until lease_until); else it lets go.
-- Returns no row when owner no longer holds the key.
UPDATE run_leases SET
    pending = false,
    owner = CASE WHEN pending THEN owner ELSE '' END,
    lease_until = CASE WHEN pending THEN @lease_until::timestamptz ELSE NULL END,
    runs = runs + 1,
    updated_at = now()
WHERE tenant_id = @tenant_id AND kind = @kind AND key = @key AND owner = @owner AND lease_until IS NOT NULL
RETURNING (lease_until IS NOT NULL)::bool AS again;

-- name: RunLeaseRelease :execrows
-- Lets go of the key without running what is pending (a failed run, or a
-- worker shutting down), marking a run pending when keep_pending is set
-- (the work stopped before it was done): the sweep, or the next request,
-- runs it.
UPDATE run_leases SET owner = '', lease_until = NULL, pending = pending OR @keep_pending::bool, updated_at = now()
WHERE tenant_id = @tenant_id AND kind = @kind AND key = @key AND owner = @owner;

-- name: RunLeaseHeld :many
-- The key's row while owner holds it, locked against a change of holder
-- until the transaction ends (no row: owner does not hold it).
SELECT owner FROM run_leases
WHERE tenant_id = @tenant_id AND kind = @kind AND key = @key AND owner = @owner AND lease_until IS NOT NULL
FOR SHARE;

-- name: RunLeaseGet :many
SELECT * FROM run_leases WHERE tenant_id = @tenant_id AND kind = @kind AND key = @key;

-- name: RunLeaseStale :many
-- Runs of a kind whose holder stopped, across tenants, for the sweep: keys
-- whose lease ran out and released keys with a run pending, through the
-- owner's function.
SELECT tenant_id::text, key::text FROM mnemos_stale_runs(@kind::text, @max_rows::integer);
