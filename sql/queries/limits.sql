-- name: LimitBucketTake :one
-- Refills a tenant's bucket for the time since it was last refilled (rate
-- tokens per second, at most burst), then takes up to want whole tokens.
-- Returns what it granted and the tokens left. A new bucket starts full.
INSERT INTO limit_buckets AS b (tenant_id, bucket, tokens, refilled_at, granted)
VALUES (sqlc.arg(tenant_id), sqlc.arg(bucket),
        CAST(sqlc.arg(burst) AS float8) - least(CAST(sqlc.arg(want) AS integer), CAST(floor(CAST(sqlc.arg(burst) AS float8)) AS integer)),
        now(),
        least(CAST(sqlc.arg(want) AS integer), CAST(floor(CAST(sqlc.arg(burst) AS float8)) AS integer)))
ON CONFLICT (tenant_id, bucket) DO UPDATE SET
    granted = least(CAST(sqlc.arg(want) AS integer), CAST(floor(least(CAST(sqlc.arg(burst) AS float8),
        b.tokens + CAST(sqlc.arg(rate) AS float8) * greatest(0, CAST(extract(epoch FROM now() - b.refilled_at) AS float8)))) AS integer)),
    tokens = least(CAST(sqlc.arg(burst) AS float8),
        b.tokens + CAST(sqlc.arg(rate) AS float8) * greatest(0, CAST(extract(epoch FROM now() - b.refilled_at) AS float8)))
        - least(CAST(sqlc.arg(want) AS integer), CAST(floor(least(CAST(sqlc.arg(burst) AS float8),
            b.tokens + CAST(sqlc.arg(rate) AS float8) * greatest(0, CAST(extract(epoch FROM now() - b.refilled_at) AS float8)))) AS integer)),
    refilled_at = greatest(b.refilled_at, now())
RETURNING granted, tokens;

-- name: ActiveSessionTouch :execrows
-- Marks a session active again when it still is (active within the window).
UPDATE active_sessions SET active_at = now()
WHERE tenant_id = @tenant_id AND session_id = @session_id
  AND active_at > now() - make_interval(secs => CAST(sqlc.arg(window_seconds) AS float8));

-- name: ActiveSessionsLock :exec
-- Serializes the sessions of one tenant that become active, so the cap holds
-- across replicas. Released at the end of the transaction.
SELECT pg_advisory_xact_lock(hashtextextended('mnemos.active_sessions:' || CAST(sqlc.arg(tenant_id) AS text), 0));

-- name: ActiveSessionsCount :one
-- The tenant's active sessions, and when the longest idle of them became active.
SELECT count(*) AS active,
       CAST(coalesce(min(active_at), now()) AS timestamptz) AS oldest,
       CAST(now() AS timestamptz) AS now
FROM active_sessions
WHERE tenant_id = @tenant_id AND active_at > now() - make_interval(secs => CAST(sqlc.arg(window_seconds) AS float8));

-- name: ActiveSessionUpsert :exec
INSERT INTO active_sessions (tenant_id, session_id, active_at) VALUES (@tenant_id, @session_id, now())
ON CONFLICT (tenant_id, session_id) DO UPDATE SET active_at = now();

-- name: ActiveSessionsPrune :exec
-- Deletes a bounded number of the tenant's rows that no longer count.
DELETE FROM active_sessions AS a
WHERE a.tenant_id = CAST(sqlc.arg(tenant_id) AS text) AND a.session_id IN (
    SELECT s.session_id FROM active_sessions AS s
    WHERE s.tenant_id = CAST(sqlc.arg(tenant_id) AS text)
      AND s.active_at <= now() - make_interval(secs => CAST(sqlc.arg(window_seconds) AS float8))
    LIMIT 500);
