-- Runtime settings of the stack, written by the gateway at start from its
-- options (Scripts/devstack up --signaling-rate-limit … --heartbeat-silence …),
-- so that tests can compress time. One row.
create table private.settings (
    id boolean primary key default true check (id),
    signaling_rate_limit integer not null default 200,
    signaling_rate_window_seconds integer not null default 60,
    heartbeat_silence_seconds integer not null default 120
);
insert into private.settings default values;
grant select, update on private.settings to service_role;

-- The session's signaling-insert lock: one transaction-scoped advisory lock per
-- session. The limits trigger below takes it to serialize one session's inserts;
-- the gateway's session-approve and session-end take it (through this function,
-- so the key lives in one place) before they lock the session row, the order an
-- insert takes the two in (this lock, then the foreign key's KEY SHARE).
create function private.lock_session_inserts(sid uuid) returns void
language sql
set search_path = pg_catalog
as $$ select pg_advisory_xact_lock(hashtextextended(sid::text, 429)) $$;
revoke all on function private.lock_session_inserts(uuid) from public;
grant execute on function private.lock_session_inserts(uuid) to service_role;

-- spec §6 "Limits (enforced by a database trigger)":
--   payload over 64 KB            → SQLSTATE 54000
--   more than N rows per session
--   in the last W seconds (both
--   sides; N=200, W=60 by default) → SQLSTATE P0429
-- SECURITY DEFINER: the count must see every row of the session, while the
-- inserting client can read only the rows addressed to itself.
create function private.signaling_limits() returns trigger
language plpgsql security definer
set search_path = pg_catalog, public, private
as $$
declare
    lim integer;
    win integer;
    recent integer;
begin
    if octet_length(new.payload::text) > 65536 then
        raise exception 'payload too large: % bytes (limit 65536)', octet_length(new.payload::text)
            using errcode = '54000';
    end if;
    -- The server's clock stamps every row: a client-chosen created_at could
    -- otherwise slip past the window below (and reorder the backfill).
    new.created_at := now();
    select signaling_rate_limit, signaling_rate_window_seconds into lim, win from private.settings;
    -- Serialize inserts of one session so that parallel inserts cannot pass the limit together.
    perform private.lock_session_inserts(new.session_id);
    select count(*) into recent from public.signaling_messages
        where session_id = new.session_id
          and created_at > now() - make_interval(secs => win);
    if recent >= lim then
        raise exception 'too many signaling messages for this session: % in the last % s (limit %)', recent, win, lim
            using errcode = 'P0429';
    end if;
    return new;
end
$$;
revoke all on function private.signaling_limits() from public;

create trigger signaling_limits before insert on public.signaling_messages
    for each row execute function private.signaling_limits();

-- The cleanup job (docs/contract.md, "Endpoints and the backend's rules"): pairing window over → expired;
-- sender authorization over, or connected without heartbeat for the silence
-- limit → disconnected. Inserts no disconnect row. Returns the ids it changed.
create function private.cleanup_sessions()
returns table (session_id uuid, new_status text)
language plpgsql
set search_path = pg_catalog, public, private
as $$
declare
    silence integer;
begin
    select heartbeat_silence_seconds into silence from private.settings;
    return query
    with expired as (
        update public.casting_sessions s
           set status = 'expired', ended_at = now(), updated_at = now()
         where s.status in ('waiting', 'pairing') and s.expires_at <= now()
        returning s.id, s.status
    ), disconnected as (
        update public.casting_sessions s
           set status = 'disconnected', ended_at = now(), updated_at = now()
         where (s.status in ('connecting', 'connected') and s.sender_auth_expires_at <= now())
            or (s.status = 'connected'
                and coalesce(s.last_heartbeat_at, s.connected_at) <= now() - make_interval(secs => silence))
        returning s.id, s.status
    )
    select * from expired union all select * from disconnected;
    delete from private.pairing_secrets p
     using public.casting_sessions s
     where s.id = p.session_id and s.status <> 'waiting';
end
$$;
revoke all on function private.cleanup_sessions() from public;
grant execute on function private.cleanup_sessions() to service_role;
