-- The auth schema of the stand-in: anonymous users, sessions and rotating
-- refresh tokens (docs/contract.md, wire A). Only the gateway (service_role)
-- touches these tables; clients see them through /auth/v1 only.
create schema auth;
grant usage on schema auth to anon, authenticated, service_role;

create table auth.users (
    id uuid primary key default gen_random_uuid(),
    aud text not null default 'authenticated',
    role text not null default 'authenticated',
    is_anonymous boolean not null default true,
    raw_app_meta_data jsonb not null default '{}',
    raw_user_meta_data jsonb not null default '{}',
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    last_sign_in_at timestamptz
);

-- One row per sign-in; the refresh tokens of one session form a "family".
create table auth.sessions (
    id uuid primary key default gen_random_uuid(),
    user_id uuid not null references auth.users(id) on delete cascade,
    created_at timestamptz not null default now(),
    refreshed_at timestamptz,
    revoked_at timestamptz
);

-- Refresh tokens are stored only as SHA-256 (hex) of the opaque token.
-- `revoked` is set when the token is rotated (used once) or when its family
-- is revoked after a reuse (GoTrue's refresh-token reuse detection).
create table auth.refresh_tokens (
    id bigserial primary key,
    token_sha256 text not null unique,
    user_id uuid not null references auth.users(id) on delete cascade,
    session_id uuid not null references auth.sessions(id) on delete cascade,
    parent_id bigint references auth.refresh_tokens(id),
    revoked boolean not null default false,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);
create index on auth.refresh_tokens (session_id);

grant select, insert, update, delete on all tables in schema auth to service_role;
grant usage on all sequences in schema auth to service_role;

-- auth.uid() exactly as Supabase defines it (docs/contract.md, wire B).
create function auth.uid() returns uuid
language sql stable
as $$
  select coalesce(
    nullif(current_setting('request.jwt.claim.sub', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
  )::uuid
$$;

create function auth.role() returns text
language sql stable
as $$
  select coalesce(
    nullif(current_setting('request.jwt.claim.role', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role')
  )::text
$$;

create function auth.jwt() returns jsonb
language sql stable
as $$
  select coalesce(
    nullif(current_setting('request.jwt.claim', true), ''),
    nullif(current_setting('request.jwt.claims', true), '')
  )::jsonb
$$;

grant execute on function auth.uid(), auth.role(), auth.jwt() to anon, authenticated, service_role;
