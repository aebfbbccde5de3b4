-- name: DatabaseIdentity :one
-- What tells this database from any other, now or later: the cluster's
-- system identifier (new with every initdb) and the database's oid (new
-- with every CREATE DATABASE, a copy of a template included). Both stay
-- the same across restarts.
SELECT (SELECT s.system_identifier FROM pg_catalog.pg_control_system() s)::text AS cluster,
    d.oid::bigint AS database_oid
FROM pg_catalog.pg_database d WHERE d.datname = current_database();
