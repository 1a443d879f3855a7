-- Realtime change notifications for the gateway's /realtime/v1/websocket
-- (docs/contract.md, wire C).
--
-- PostgreSQL NOTIFY payloads are limited to 8000 bytes and a signaling row may
-- carry a 64 KB payload, so the triggers notify only the row's key; the
-- gateway then reads the row once per subscriber under that subscriber's role
-- and claims, which is how Supabase Realtime applies RLS to postgres_changes.
--
-- Payload: {"schema","table","type":"INSERT"|"UPDATE","id","commit_timestamp"}.
-- NOTIFY is delivered only when the transaction commits, in commit order, so
-- a rolled-back insert (e.g. one refused by the 64 KB or rate-limit trigger)
-- is never announced.

create or replace function public.castd_realtime_notify() returns trigger
language plpgsql
set search_path = pg_catalog
as $$
begin
  perform pg_notify('castd_realtime', json_build_object(
    'schema', tg_table_schema,
    'table', tg_table_name,
    'type', tg_op,
    'id', new.id,
    -- Realtime's commit_timestamp format: UTC, milliseconds, "Z".
    'commit_timestamp', to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  )::text);
  return null;
end
$$;

revoke all on function public.castd_realtime_notify() from public;

drop trigger if exists castd_realtime_notify on public.casting_sessions;
create trigger castd_realtime_notify
  after insert or update on public.casting_sessions
  for each row execute function public.castd_realtime_notify();

drop trigger if exists castd_realtime_notify on public.signaling_messages;
create trigger castd_realtime_notify
  after insert or update on public.signaling_messages
  for each row execute function public.castd_realtime_notify();
