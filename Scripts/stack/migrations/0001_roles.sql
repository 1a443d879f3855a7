-- Roles as Supabase defines them (docs/contract.md, wire B): PostgREST connects as
-- `authenticator` and switches, per request, to the role named in the JWT.
-- anon / authenticated are NOLOGIN and subject to RLS; service_role bypasses
-- RLS and is what the /api/public endpoints and the cleanup job run as.
create role anon nologin noinherit;
create role authenticated nologin noinherit;
create role service_role nologin noinherit bypassrls;
-- The gateway's login role. Its password is set by Scripts/devstack at start.
create role authenticator login noinherit;
grant anon, authenticated, service_role to authenticator;

-- Private schema: tables no client role can read (pairing secrets, attempts,
-- settings). Only service_role and security-definer functions reach it.
create schema private;
revoke all on schema private from public;
grant usage on schema private to service_role;

grant usage on schema public to anon, authenticated, service_role;
