-- name: IsolationRole :one
-- The connection's role and whether it, or a role it can act as, escapes
-- row-level security.
SELECT r.rolname::text AS role, coalesce(r.rolsuper, false)::bool AS superuser, coalesce(r.rolbypassrls, false)::bool AS bypassrls,
    coalesce((SELECT string_agg(o.rolname, ', ' ORDER BY o.rolname) FROM pg_catalog.pg_roles o
              WHERE o.oid <> r.oid AND (o.rolsuper OR o.rolbypassrls) AND pg_has_role(r.oid, o.oid, 'MEMBER')), '')::text AS privileged_memberships
FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;

-- name: IsolationOwnedTables :many
-- Tables of the schema the connection's role owns, directly or through a
-- role it is a member of.
SELECT c.relname::text AS table_name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND pg_has_role(current_user, c.relowner, 'MEMBER')
ORDER BY 1;

-- name: IsolationTenantTables :many
-- Every table with a tenant_id column: whether row-level security is enabled
-- and forced, whether it has the tenant_isolation policy, and the other
-- permissive policies that apply to the connection's role (which would
-- widen what it sees).
SELECT c.relname::text AS table_name, c.relrowsecurity AS enabled, c.relforcerowsecurity AS forced,
    EXISTS (SELECT 1 FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'tenant_isolation' AND p.polcmd = '*')::bool AS isolated,
    coalesce((SELECT string_agg(p.polname::text, ', ' ORDER BY p.polname) FROM pg_catalog.pg_policy p
              WHERE p.polrelid = c.oid AND p.polpermissive AND p.polname <> 'tenant_isolation'
                AND (0::oid = ANY(p.polroles) OR EXISTS (SELECT 1 FROM unnest(p.polroles) AS pr(oid) WHERE pg_has_role(current_user, pr.oid, 'MEMBER')))), '')::text AS widening_policies
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
  AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND a.attnum > 0 AND NOT a.attisdropped)
ORDER BY 1;
