-- casting_sessions and its private companions (docs/contract.md
-- "Session statuses", "Database rules"; spec §3, §4, §10).
create table public.casting_sessions (
    id uuid primary key default gen_random_uuid(),
    receiver_user_id uuid not null references auth.users(id),
    sender_user_id uuid references auth.users(id),
    status text not null default 'waiting'
        check (status in ('waiting', 'pairing', 'connecting', 'connected', 'disconnected', 'expired')),
    device_name text,
    stream_prefs jsonb,
    -- end of the pairing window (spec §4: 5 minutes)
    expires_at timestamptz not null,
    -- spec §10: approval sets now + 2 h; heartbeats extend it, capped at 12 h
    sender_auth_expires_at timestamptz,
    connected_at timestamptz,
    last_heartbeat_at timestamptz,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    ended_at timestamptz
);
create index on public.casting_sessions (receiver_user_id);
create index on public.casting_sessions (sender_user_id);
create index on public.casting_sessions (status);

alter table public.casting_sessions enable row level security;

-- Clients may read a session they take part in; they can never write one
-- (no INSERT/UPDATE/DELETE grant, and no write policy either).
create policy casting_sessions_select_participant on public.casting_sessions
    for select to authenticated
    using (auth.uid() = receiver_user_id or auth.uid() = sender_user_id);

revoke all on public.casting_sessions from anon, authenticated;
grant select on public.casting_sessions to anon, authenticated;
grant select, insert, update, delete on public.casting_sessions to service_role;

-- Pairing secrets, never readable by clients (spec §3, §4): the PIN only as
-- HMAC-SHA256(server secret, digits), the QR token only as SHA-256(token),
-- both hex. Deleted on a successful pair.
create table private.pairing_secrets (
    session_id uuid primary key references public.casting_sessions(id) on delete cascade,
    pin_hmac text not null unique,
    qr_token_sha256 text not null,
    failed_qr_count integer not null default 0
);

-- Every pairing attempt, recorded BEFORE the code is checked (spec §4), so
-- that parallel bursts count. `succeeded` stays null while the check runs and
-- a pending attempt counts as a failure.
create table private.pairing_attempts (
    id bigserial primary key,
    client_ip text not null,
    user_id uuid not null,
    method text not null check (method in ('pin', 'qr')),
    session_id uuid,
    succeeded boolean,
    attempted_at timestamptz not null default clock_timestamp()
);
create index on private.pairing_attempts (client_ip, attempted_at);
create index on private.pairing_attempts (user_id, attempted_at);

grant select, insert, update, delete on all tables in schema private to service_role;
grant usage on all sequences in schema private to service_role;
