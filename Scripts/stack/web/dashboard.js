// /dashboard: the receiver creates a session, shows its PIN and pairing link,
// lists join requests and approves or denies them (spec §4, §5;
// docs/contract.md, receiver endpoints). After Approve it opens
// /viewer/<id> (unless ?stay=1, which tests use to keep watching this page).

import { boot, $, groupPin, showError } from "./lib/app.js";
import { SessionFeed } from "./lib/feed.js";
import { renderQr } from "./lib/qr.js";

const params = new URLSearchParams(location.search);
const stay = params.get("stay") === "1";

const state = {
  ctx: null,
  session: null,     // {sessionId, pin, qrUrl, expiresAt}
  status: null,
  feed: null,
  requests: new Map(), // row id → <li>
  expiryTimer: null,
};

// Exposed for tests and for a person poking at the console.
window.castdDashboard = {
  get sessionId() { return state.session?.sessionId ?? null; },
  get pin() { return state.session?.pin ?? null; },
  get status() { return state.status; },
  get requests() { return [...state.requests.keys()]; },
  /** Tests: drop the Realtime socket as a network failure would. */
  dropSocket() { state.ctx?.realtime.ws?.close(); return true; },
  events: [],
};

function log(event, fields = {}) {
  window.castdDashboard.events.push({ t: Date.now(), event, ...fields });
  console.log(`dashboard ${event}`, JSON.stringify(fields));
}

function setStatus(status) {
  state.status = status;
  $("status").textContent = status ?? "—";
  $("status").dataset.status = status ?? "";
  document.body.dataset.status = status ?? "";
  // The code is single-use (spec §4): once paired, or once the session is
  // over, show it as spent so nobody types it in again.
  document.body.classList.toggle("code-used", !!status && status !== "waiting");
  if (status === "expired" || status === "disconnected") {
    clearTimeout(state.expiryTimer);
    $("expires").textContent = "This session is over. Press New code to pair again.";
  }
}

function streamPrefs() {
  return {
    autoQuality: $("pref-auto").checked,
    resolution: $("pref-resolution").value,
    frameRate: Number($("pref-framerate").value),
  };
}

async function createSession() {
  const { rest, realtime } = state.ctx;
  state.feed?.stop();
  clearTimeout(state.expiryTimer);
  state.requests.clear();
  $("join-requests").replaceChildren($("no-requests") || noRequestsItem());
  $("viewer-link").hidden = true;
  $("error").hidden = true;
  $("pin").textContent = "··· ···";

  const s = await rest.api("session-create", {});
  state.session = s;
  log("session_created", { sessionId: s.sessionId });
  $("pin").textContent = groupPin(s.pin);
  $("pin").dataset.pin = String(s.pin).replace(/\D/g, "");
  $("session-id").textContent = s.sessionId;
  $("pair-url").textContent = s.qrUrl;
  $("pair-url").href = s.qrUrl;
  const expires = new Date(s.expiresAt);
  $("expires").textContent = `Code expires at ${expires.toLocaleTimeString()}`;
  renderQr($("qr"), s.qrUrl, 4);
  setStatus("waiting");
  document.body.classList.remove("code-expired");
  // The pairing window (spec §4: 5 minutes): show it, the cleanup job expires it.
  state.expiryTimer = setTimeout(() => {
    if (state.status === "waiting") {
      $("expires").textContent = "This code has expired. Press New code.";
      document.body.classList.add("code-expired");
    }
  }, Math.max(0, expires.getTime() - Date.now()));

  state.feed = new SessionFeed({
    realtime, rest, sessionId: s.sessionId,
    onRow: (row) => onRow(row),
    onSession: (rec) => { if (rec.status) setStatus(rec.status); },
    onStatus: (st, detail) => log("channel", { status: st, detail }),
  });
  state.feed.start();
}

function noRequestsItem() {
  const li = document.createElement("li");
  li.id = "no-requests";
  li.className = "muted";
  li.textContent = "No requests yet. Pair from the iPad to see it here.";
  return li;
}

function onRow(row) {
  log("row", { type: row.message_type, id: row.id });
  if (row.message_type === "join_request") addRequest(row);
}

function addRequest(row) {
  if (state.requests.has(row.id)) return;
  $("no-requests")?.remove();
  const li = document.createElement("li");
  li.className = "join-request";
  li.dataset.testid = "join-request";
  li.dataset.rowId = row.id;
  const name = document.createElement("span");
  name.className = "device";
  name.dataset.testid = "device-name";
  name.textContent = row.payload?.deviceName || "iPad";
  const when = document.createElement("span");
  when.className = "muted small";
  when.textContent = ` wants to cast · ${new Date(row.created_at || Date.now()).toLocaleTimeString()}`;
  const approve = document.createElement("button");
  approve.type = "button";
  approve.textContent = "Approve";
  approve.className = "primary";
  approve.dataset.testid = "approve";
  const deny = document.createElement("button");
  deny.type = "button";
  deny.textContent = "Deny";
  deny.dataset.testid = "deny";
  const result = document.createElement("span");
  result.className = "result";
  result.dataset.testid = "request-result";
  approve.onclick = () => decide(li, true);
  deny.onclick = () => decide(li, false);
  li.append(name, when, " ", approve, deny, result);
  $("join-requests").append(li);
  state.requests.set(row.id, li);
}

async function decide(li, approve) {
  const buttons = li.querySelectorAll("button");
  buttons.forEach((b) => { b.disabled = true; });
  const result = li.querySelector(".result");
  // The session's status arrives over Realtime and may land before the answer below
  // (issue 17): say at once that the decision is under way, so the request is never
  // shown with no result next to a status it caused.
  result.textContent = approve ? " Approving…" : " Denying…";
  const body = { sessionId: state.session.sessionId, approve };
  if (approve) body.streamPrefs = streamPrefs();
  try {
    const res = await state.ctx.rest.api("session-approve", body);
    log(approve ? "approved" : "denied", { status: res.status });
    setStatus(res.status);
    result.textContent = approve ? " Approved" : " Denied";
    li.dataset.decision = approve ? "approved" : "denied";
    if (approve) openViewer();
  } catch (e) {
    result.textContent = "";
    buttons.forEach((b) => { b.disabled = false; });
    showError($("error"), e);
  }
}

function openViewer() {
  const href = `/viewer/${state.session.sessionId}`;
  $("open-viewer").href = href;
  $("viewer-link").hidden = false;
  if (stay) return;
  $("navigating").textContent = "Opening the viewer…";
  setTimeout(() => { location.href = href; }, 1500);
}

async function main() {
  try {
    state.ctx = await boot();
    state.ctx.auth.onRefresh(() => log("token_refreshed", {}));
    $("identity").textContent = `signed in anonymously · ${state.ctx.auth.userId.slice(0, 8)}`;
    $("new-code").onclick = () => createSession().catch((e) => showError($("error"), e));
    await createSession();
  } catch (e) {
    log("error", { code: e.code, message: e.message });
    showError($("error"), e);
  }
}

main();
