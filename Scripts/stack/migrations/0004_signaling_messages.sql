-- signaling_messages (docs/contract.md "Signaling rows", "Endpoints and the backend's rules";
-- spec §6).
create table public.signaling_messages (
    id uuid primary key default gen_random_uuid(),
    session_id uuid not null references public.casting_sessions(id) on delete cascade,
    sender_role text not null check (sender_role in ('sender', 'receiver')),
    recipient_role text not null check (recipient_role in ('sender', 'receiver')),
    message_type text not null,
    payload jsonb not null default '{}',
    created_at timestamptz not null default now()
);
create index on public.signaling_messages (session_id, created_at);

alter table public.signaling_messages enable row level security;

-- Each side reads only the rows addressed to itself, also after the session
-- ended (docs/contract.md: also after the session ends).
create policy signaling_select_sender on public.signaling_messages
    for select to authenticated
    using (
        recipient_role = 'sender'
        and exists (select 1 from public.casting_sessions s
                    where s.id = session_id and s.sender_user_id = auth.uid())
    );

create policy signaling_select_receiver on public.signaling_messages
    for select to authenticated
    using (
        recipient_role = 'receiver'
        and exists (select 1 from public.casting_sessions s
                    where s.id = session_id and s.receiver_user_id = auth.uid())
    );

-- spec §6: the four sender rules.
create policy signaling_insert_sender on public.signaling_messages
    for insert to authenticated
    with check (
        sender_role = 'sender'
        and recipient_role = 'receiver'
        and exists (select 1 from public.casting_sessions s
                    where s.id = session_id
                      and s.sender_user_id = auth.uid()
                      and s.sender_auth_expires_at > now()
                      and s.status in ('pairing', 'connecting', 'connected'))
    );

-- docs/contract.md: the receiver's rule.
create policy signaling_insert_receiver on public.signaling_messages
    for insert to authenticated
    with check (
        sender_role = 'receiver'
        and recipient_role = 'sender'
        and exists (select 1 from public.casting_sessions s
                    where s.id = session_id
                      and s.receiver_user_id = auth.uid()
                      and s.status in ('pairing', 'connecting', 'connected'))
    );

revoke all on public.signaling_messages from anon, authenticated;
grant select, insert on public.signaling_messages to anon, authenticated;
grant select, insert, update, delete on public.signaling_messages to service_role;
