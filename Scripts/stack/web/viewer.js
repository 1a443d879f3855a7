// /viewer/:id — the answerer (spec §6, §7, §11; docs/contract.md).
//
// Each offer with a new negotiationId replaces the peer connection; the answer
// carries the same negotiationId, local candidates trickle one row each, then
// endOfCandidates. Remote candidates that arrive before the offer is applied
// are buffered per negotiationId; rows of other negotiationIds are ignored.
// Receiver recovery (spec §11): a disconnected connection gets 8 s to recover,
// then "Reconnecting…" waits 30 s for a fresh offer, at most 3 cycles, then
// "Failed" with Retry. Query parameters compress these for tests:
// ?grace=<s>&wait=<s>&cycles=<n>; ?ice=none uses no ICE servers at all; ?codec=vp8|h264|none
// answers with that video codec only (none: with none castd offers); ?audio=reject
// stops the audio transceiver (Chromium then answers its m-line inactive), as a
// receiver without audio would.

import { boot, $, numberParam, showError } from "./lib/app.js";
import { SessionFeed } from "./lib/feed.js";

const params = new URLSearchParams(location.search);
const GRACE_MS = numberParam("grace", 8) * 1000;
const WAIT_MS = numberParam("wait", 30) * 1000;
const MAX_CYCLES = numberParam("cycles", 3);
const sessionId = decodeURIComponent(location.pathname.split("/").filter(Boolean).pop() || "");
const pageLoadedAt = Date.now();
const connectedKey = `castd.viewer.connected.${sessionId}`;

const MESSAGES = {
  starting: "Connecting to the session…",
  waiting: "Waiting for the iPad to start casting…",
  connecting: "Connecting…",
  connected: "",
  recovering: "Connection interrupted…",
  reconnecting: "Reconnecting…",
  failed: "Failed. The connection could not be restored.",
  "sender-disconnected": "Your iPad has disconnected.",
  ended: "The broadcasting session has ended.",
  stopped: "You ended the session.",
  error: "Something went wrong.",
};
const TERMINAL = new Set(["sender-disconnected", "ended", "stopped"]);

const v = {
  ctx: null,
  feed: null,
  state: "starting",
  pc: null,
  negotiationId: null,
  remoteSet: false,
  seenOffers: new Set(),     // negotiationIds already answered or deliberately ignored
  pending: new Map(),        // negotiationId → [candidate payloads] not yet applicable
  ignoreOffersBefore: 0,     // ms since epoch; set after a refresh on a connected session
  cycles: 0,
  graceTimer: null,
  waitTimer: null,
  rowChain: Promise.resolve(),
  outChain: Promise.resolve(),
  iceServers: [],
  stats: null,
  stopping: false,           // Stop pressed: session-end in flight
  events: [],
};

function log(event, fields = {}) {
  v.events.push({ t: Date.now(), event, ...fields });
  if (v.events.length > 500) v.events.shift();
  console.log(`viewer ${event}`, JSON.stringify(fields));
}

// The test hook: state, stats (JSON) and pixels of the <video>.
window.castdViewer = {
  get state() { return v.state; },
  get stats() { return v.stats; },
  get negotiationId() { return v.negotiationId; },
  get cycles() { return v.cycles; },
  get message() { return $("message").textContent; },
  get events() { return v.events; },
  config: { graceMs: GRACE_MS, waitMs: WAIT_MS, maxCycles: MAX_CYCLES },
  samplePixels,
};

function setState(state, detail) {
  // Terminal states stick, except that a disconnect row may follow the status
  // change it explains (the sender inserts it first, but delivery can reorder).
  if (TERMINAL.has(v.state) && !(v.state === "ended" && state === "sender-disconnected")) return;
  const changed = v.state !== state;
  v.state = state;
  document.body.dataset.state = state;
  $("st-state").textContent = state;
  let text = MESSAGES[state] ?? state;
  if (state === "reconnecting" && MAX_CYCLES > 1) text = `Reconnecting… (${v.cycles}/${MAX_CYCLES})`;
  $("message").textContent = detail ? `${text} ${detail}` : text;
  $("overlay").hidden = state === "connected";
  $("retry").hidden = state !== "failed";
  $("stop").disabled = TERMINAL.has(state);
  if (changed) log("state", { state, detail });
}

function clearTimers() {
  clearTimeout(v.graceTimer); v.graceTimer = null;
  clearTimeout(v.waitTimer); v.waitTimer = null;
}

function teardown() {
  if (v.pc) {
    const pc = v.pc;
    v.pc = null;
    pc.ontrack = pc.onicecandidate = pc.oniceconnectionstatechange = pc.onconnectionstatechange = null;
    pc.close();
  }
  v.remoteSet = false;
}

// ---- rows -------------------------------------------------------------------

function enqueueRows(rows, backfill) {
  v.rowChain = v.rowChain.then(() => handleRows(rows, backfill)).catch((e) => {
    log("row_error", { message: e.message });
  });
}

function offerAcceptable(row) {
  const nid = row.payload?.negotiationId;
  if (!nid || typeof row.payload.sdp !== "string") return false;
  if (v.seenOffers.has(nid)) return false; // the receiver answers once per offer (spec §7)
  // After a refresh on a connected session, old offers are stale (spec §11).
  if (v.ignoreOffersBefore && Date.parse(row.created_at) < v.ignoreOffersBefore) return false;
  return true;
}

async function handleRows(rows, backfill) {
  if (backfill) {
    // A backfill may hold several offers: only the newest acceptable one counts.
    const offers = rows.filter((r) => r.message_type === "offer" && offerAcceptable(r));
    const newest = offers[offers.length - 1];
    for (const r of offers) if (r !== newest) { v.seenOffers.add(r.payload.negotiationId); v.pending.delete(r.payload.negotiationId); }
    for (const r of rows) if (r.message_type === "offer" && !offerAcceptable(r) && r.payload?.negotiationId) {
      if (!v.seenOffers.has(r.payload.negotiationId)) log("offer_ignored", { negotiationId: r.payload.negotiationId, why: "older than page load" });
      v.seenOffers.add(r.payload.negotiationId);
    }
  }
  for (const row of rows) await handleRow(row);
}

async function handleRow(row) {
  const p = row.payload || {};
  switch (row.message_type) {
    case "offer":
      if (!offerAcceptable(row)) {
        if (p.negotiationId && !v.seenOffers.has(p.negotiationId)) {
          v.seenOffers.add(p.negotiationId);
          log("offer_ignored", { negotiationId: p.negotiationId, why: "older than page load" });
        }
        return;
      }
      if (TERMINAL.has(v.state)) return;
      return acceptOffer(row);
    case "ice_candidate":
      return remoteCandidate(p);
    case "disconnect":
      teardown();
      clearTimers();
      log("disconnect", { reason: p.reason });
      setState("sender-disconnected", p.reason && p.reason !== "sender_ended" ? `(reason: ${p.reason})` : "");
      return;
    default:
      return; // tolerate unknown message types (docs/contract.md, "Signaling rows")
  }
}

function onSessionUpdate(record) {
  log("session", { status: record.status });
  if (record.status === "disconnected" || record.status === "expired") {
    // Our own Stop also changes the status: that is "stopped", not "ended".
    if (TERMINAL.has(v.state) || v.stopping) return;
    teardown();
    clearTimers();
    setState("ended");
  }
}

// ---- negotiation ------------------------------------------------------------

async function acceptOffer(row) {
  const { negotiationId: nid, sdp } = row.payload;
  log("offer", { negotiationId: nid, replaces: v.negotiationId });
  v.seenOffers.add(nid);
  teardown(); // a new negotiationId always replaces the old connection (spec §11)
  clearTimeout(v.waitTimer); v.waitTimer = null;
  clearTimeout(v.graceTimer); v.graceTimer = null;
  for (const k of v.pending.keys()) if (k !== nid) v.pending.delete(k);
  v.negotiationId = nid;

  // ?relay=1 (tests): only relayed candidates (RFC 8828's policy "relay"), to prove a TURN path.
  const iceTransportPolicy = params.get("relay") === "1" ? "relay" : "all";
  const pc = new RTCPeerConnection({ iceServers: v.iceServers, bundlePolicy: "max-bundle", iceTransportPolicy });
  v.pc = pc;
  const video = $("video");
  pc.ontrack = (e) => {
    // The receiver builds its view from streams[0] (spec §7).
    const stream = e.streams[0] || new MediaStream([e.track]);
    // Like the real receiver, the last track's streams[0] is what plays; a
    // sender must put all tracks in one stream (spec §7). Say when it did not.
    if (video.srcObject && video.srcObject !== stream && pc === v.pc && video.srcObject.getTracks().some((t) => t.readyState === "live")) {
      log("tracks_in_different_streams", { kind: e.track.kind });
    }
    if (video.srcObject !== stream) video.srcObject = stream;
    video.play().catch(() => { /* autoplay may wait for a gesture */ });
    log("track", { kind: e.track.kind });
  };
  let answerSent;
  const answerGate = new Promise((r) => { answerSent = r; });
  let endSent = false;
  pc.onicecandidate = (e) => {
    if (v.pc !== pc) return;
    if (e.candidate && e.candidate.candidate) {
      const c = e.candidate;
      sendAfter(answerGate, {
        negotiationId: nid, candidate: c.candidate, sdpMid: c.sdpMid,
        sdpMLineIndex: c.sdpMLineIndex, usernameFragment: c.usernameFragment,
      }, "ice_candidate");
    } else if (!e.candidate && !endSent) {
      endSent = true;
      sendAfter(answerGate, { negotiationId: nid, endOfCandidates: true }, "ice_candidate");
    }
  };
  pc.oniceconnectionstatechange = () => { if (v.pc === pc) connectionChanged(pc.iceConnectionState); };
  pc.onconnectionstatechange = () => {
    if (v.pc === pc && pc.connectionState === "failed") connectionChanged("failed");
  };

  setState("connecting");
  await pc.setRemoteDescription({ type: "offer", sdp });
  for (const t of pc.getTransceivers()) t.direction = "recvonly"; // it never sends media (spec §6)
  if (params.get("audio") === "reject") {
    for (const t of pc.getTransceivers()) if (t.receiver.track.kind === "audio") t.stop();
  }
  preferCodec(pc, params.get("codec"));
  v.remoteSet = true;
  const buffered = v.pending.get(nid) || [];
  v.pending.delete(nid);
  if (buffered.length) log("buffered_candidates_applied", { negotiationId: nid, count: buffered.length });
  for (const c of buffered) await addRemoteCandidate(pc, c);
  const answer = await pc.createAnswer();
  await pc.setLocalDescription({ type: "answer", sdp: keepOpusStereo(answer.sdp) });
  if (v.pc !== pc) return;
  try {
    await v.ctx.rest.insertSignal(row4("answer", { type: "answer", sdp: pc.localDescription.sdp, negotiationId: nid }));
    log("answer_sent", { negotiationId: nid });
  } finally {
    answerSent();
  }
}

// Chrome answers Opus without `stereo=1` and then decodes (and plays) mono; castd
// sends stereo (`sprop-stereo=1`), so the answer asks for it (RFC 7587 §7.1).
function keepOpusStereo(sdp) {
  const pt = sdp.match(/a=rtpmap:(\d+) opus\/48000\/2/i)?.[1];
  if (!pt) return sdp;
  return sdp.replace(new RegExp(`^a=fmtp:${pt} (.*)$`, "m"), (line, params) =>
    /(^|;)\s*stereo=1/.test(params) ? line : `a=fmtp:${pt} ${params};stereo=1`);
}

// ?codec=vp8|h264: answer with that video codec only (setCodecPreferences), to show a
// receiver without H.264 (Firefox, open-source Chromium) or pin H.264. ?codec=none keeps
// only codecs castd never offers (VP9, AV1), i.e. a receiver that can decode none of its.
function preferCodec(pc, wanted) {
  if (!wanted) return;
  const caps = RTCRtpReceiver.getCapabilities("video")?.codecs ?? [];
  const keep = wanted === "none" ? ["video/vp9", "video/av1"] : [`video/${wanted.toLowerCase()}`];
  const media = caps.filter((c) => keep.includes(c.mimeType.toLowerCase()));
  const rtx = caps.filter((c) => c.mimeType.toLowerCase() === "video/rtx");
  for (const t of pc.getTransceivers()) {
    if (t.receiver.track?.kind !== "video") continue;
    try {
      t.setCodecPreferences(media.concat(wanted === "none" ? [] : rtx));
      log("codec_preference", { codec: wanted, codecs: media.length });
    } catch (e) {
      log("codec_preference_failed", { codec: wanted, message: e.message });
    }
  }
}

function row4(type, payload) {
  return { session_id: sessionId, sender_role: "receiver", recipient_role: "sender", message_type: type, payload };
}

function sendAfter(gate, payload, type) {
  v.outChain = v.outChain.then(() => gate).then(() => v.ctx.rest.insertSignal(row4(type, payload)))
    .then(() => log(payload.endOfCandidates ? "end_of_candidates_sent" : "candidate_sent", {}))
    .catch((e) => log("send_failed", { type, code: e.code, message: e.message }));
}

async function remoteCandidate(p) {
  const nid = p.negotiationId;
  if (!nid) return;
  if (nid === v.negotiationId && v.pc && v.remoteSet) return addRemoteCandidate(v.pc, p);
  if (nid === v.negotiationId || !v.seenOffers.has(nid)) {
    // Before its offer is applied (or before the offer row arrived): buffer.
    if (!v.pending.has(nid)) v.pending.set(nid, []);
    v.pending.get(nid).push(p);
    return;
  }
  // A candidate of an older negotiation: ignored (spec §6).
}

async function addRemoteCandidate(pc, p) {
  try {
    if (p.endOfCandidates) await pc.addIceCandidate();
    else await pc.addIceCandidate({
      candidate: p.candidate, sdpMid: p.sdpMid ?? null,
      sdpMLineIndex: p.sdpMLineIndex ?? null, usernameFragment: p.usernameFragment ?? null,
    });
  } catch (e) {
    log("candidate_rejected", { message: e.message });
  }
}

// ---- recovery (spec §11, receiver side) -------------------------------------

function connectionChanged(s) {
  log("ice", { state: s });
  if (TERMINAL.has(v.state)) return;
  if (s === "connected" || s === "completed") {
    clearTimers();
    v.cycles = 0; // a successful connection resets the count
    sessionStorage.setItem(connectedKey, "1");
    setState("connected");
  } else if (s === "disconnected") {
    if (v.graceTimer || v.state === "reconnecting") return;
    setState("recovering");
    v.graceTimer = setTimeout(() => { v.graceTimer = null; enterReconnecting(); }, GRACE_MS);
  } else if (s === "failed") {
    clearTimeout(v.graceTimer); v.graceTimer = null;
    if (v.state !== "reconnecting") enterReconnecting();
  }
}

function enterReconnecting() {
  if (TERMINAL.has(v.state)) return;
  clearTimeout(v.waitTimer); v.waitTimer = null;
  if (v.cycles >= MAX_CYCLES) {
    teardown();
    setState("failed");
    return;
  }
  v.cycles += 1;
  setState("reconnecting");
  v.waitTimer = setTimeout(() => { v.waitTimer = null; enterReconnecting(); }, WAIT_MS);
}

function retry() {
  v.cycles = 0;
  enterReconnecting();
  v.feed?.backfill(); // anything sent while we were not listening
}

// ---- stats ------------------------------------------------------------------

async function pollStats() {
  const pc = v.pc;
  if (!pc) return;
  try {
    const report = await pc.getStats();
    let inbound = null, codec = null, pair = null, audio = null;
    const byId = new Map();
    report.forEach((s) => {
      byId.set(s.id, s);
      if (s.type === "inbound-rtp" && s.kind === "video") inbound = s;
      if (s.type === "inbound-rtp" && s.kind === "audio") audio = s;
      if (s.type === "candidate-pair" && s.nominated && s.state === "succeeded") pair = s;
    });
    if (!inbound) return;
    codec = inbound.codecId ? byId.get(inbound.codecId) : null;
    const emitted = inbound.jitterBufferEmittedCount || 0;
    v.stats = {
      negotiationId: v.negotiationId,
      codec: codec ? codec.mimeType.replace(/^video\//, "") : null,
      sdpFmtpLine: codec?.sdpFmtpLine ?? null,
      payloadType: codec?.payloadType ?? null,
      frameWidth: inbound.frameWidth ?? null,
      frameHeight: inbound.frameHeight ?? null,
      framesPerSecond: inbound.framesPerSecond ?? null,
      framesDecoded: inbound.framesDecoded ?? 0,
      framesReceived: inbound.framesReceived ?? 0,
      framesDropped: inbound.framesDropped ?? 0,
      keyFramesDecoded: inbound.keyFramesDecoded ?? 0,
      qpSum: inbound.qpSum ?? null,      // the decoder's QP summed over framesDecoded (issue 32)
      packetsReceived: inbound.packetsReceived ?? 0,
      packetsLost: inbound.packetsLost ?? 0,
      bytesReceived: inbound.bytesReceived ?? 0,
      nackCount: inbound.nackCount ?? 0,
      pliCount: inbound.pliCount ?? 0,
      firCount: inbound.firCount ?? 0,
      // Chromium's freeze: a frame later than max(3 × the mean gap, mean gap + 150 ms).
      freezeCount: inbound.freezeCount ?? null,
      totalFreezesDuration: inbound.totalFreezesDuration ?? null,
      pauseCount: inbound.pauseCount ?? null,
      totalPausesDuration: inbound.totalPausesDuration ?? null,
      retransmittedPacketsReceived: inbound.retransmittedPacketsReceived ?? null,
      rtxSsrc: inbound.rtxSsrc ?? null,     // set when the browser tied an RTX stream to this one
      jitterBufferDelayMs: emitted ? (inbound.jitterBufferDelay / emitted) * 1000 : null,
      localCandidateType: pair ? byId.get(pair.localCandidateId)?.candidateType ?? null : null,
      remoteCandidateType: pair ? byId.get(pair.remoteCandidateId)?.candidateType ?? null : null,
      roundTripTimeMs: pair?.currentRoundTripTime != null ? pair.currentRoundTripTime * 1000 : null,
      audio: audio ? {
        codec: audio.codecId ? byId.get(audio.codecId)?.mimeType?.replace(/^audio\//, "") ?? null : null,
        sdpFmtpLine: audio.codecId ? byId.get(audio.codecId)?.sdpFmtpLine ?? null : null,
        channels: audio.codecId ? byId.get(audio.codecId)?.channels ?? null : null,
        packetsReceived: audio.packetsReceived ?? 0,
        packetsLost: audio.packetsLost ?? 0,
        totalSamplesReceived: audio.totalSamplesReceived ?? 0,
        concealedSamples: audio.concealedSamples ?? 0,
        concealmentEvents: audio.concealmentEvents ?? 0,
        audioLevel: audio.audioLevel ?? null,            // 0…1, linear, of the last 200 ms or so
        totalAudioEnergy: audio.totalAudioEnergy ?? null,
        totalSamplesDuration: audio.totalSamplesDuration ?? null,
        jitterBufferDelayMs: audio.jitterBufferEmittedCount ? (audio.jitterBufferDelay / audio.jitterBufferEmittedCount) * 1000 : null,
      } : null,
      streams: $("video").srcObject ? $("video").srcObject.getTracks().map((t) => t.kind).sort() : [],
      at: Date.now(),
    };
    const s = v.stats;
    $("st-codec").textContent = s.codec ? `${s.codec}${s.sdpFmtpLine ? " · " + (s.sdpFmtpLine.match(/profile-level-id=([0-9a-f]+)/i)?.[1] ?? "") : ""}` : "—";
    $("st-resolution").textContent = s.frameWidth ? `${s.frameWidth}×${s.frameHeight}` : "—";
    $("st-fps").textContent = s.framesPerSecond != null ? String(Math.round(s.framesPerSecond)) : "—";
    $("st-frames").textContent = String(s.framesDecoded);
    $("st-lost").textContent = String(s.packetsLost);
    $("st-jitter").textContent = s.jitterBufferDelayMs != null ? `${s.jitterBufferDelayMs.toFixed(0)} ms` : "—";
    const a = s.audio;
    $("st-audio").textContent = a ? `${a.packetsReceived} pkts · ${a.totalSamplesReceived ? (100 * a.concealedSamples / a.totalSamplesReceived).toFixed(1) : "0.0"} % concealed` : "—";
    $("st-audio-level").textContent = a?.audioLevel != null ? (a.audioLevel > 0 ? `${(20 * Math.log10(a.audioLevel)).toFixed(1)} dBFS` : "silence") : "—";
  } catch (e) {
    log("stats_error", { message: e.message });
  }
}

/** Mean RGB of a rectangle of the current video frame, in video pixels. */
function samplePixels(x, y, w, h) {
  const video = $("video");
  const vw = video.videoWidth, vh = video.videoHeight;
  if (!vw || !vh) return null;
  const canvas = document.createElement("canvas");
  canvas.width = vw;
  canvas.height = vh;
  const g = canvas.getContext("2d", { willReadFrequently: true });
  g.drawImage(video, 0, 0, vw, vh);
  const data = g.getImageData(x, y, w, h).data;
  let r = 0, gr = 0, b = 0;
  const n = data.length / 4;
  for (let i = 0; i < data.length; i += 4) { r += data[i]; gr += data[i + 1]; b += data[i + 2]; }
  return { r: r / n, g: gr / n, b: b / n, width: vw, height: vh };
}

// ---- main -------------------------------------------------------------------

async function stop() {
  $("stop").disabled = true;
  v.stopping = true;
  try {
    await v.ctx.rest.api("session-end", { sessionId });
    teardown();
    clearTimers();
    setState("stopped");
  } catch (e) {
    v.stopping = false;
    $("stop").disabled = false;
    log("stop_failed", { code: e.code });
    showError($("message"), e);
  }
}

async function main() {
  $("session-id").textContent = sessionId;
  $("retry").onclick = retry;
  $("stop").onclick = stop;
  const video = $("video");
  $("unmute").onclick = () => { video.muted = !video.muted; $("unmute").textContent = video.muted ? "Unmute" : "Mute"; };
  setState("starting");
  try {
    v.ctx = await boot();
    v.ctx.auth.onRefresh(() => log("token_refreshed", {}));
    const { rest, realtime } = v.ctx;
    if (params.get("ice") !== "none") {
      try { v.iceServers = (await rest.api("ice-config")).iceServers || []; } catch (e) {
        log("ice_config_failed", { code: e.code }); // host candidates still work on one network
      }
    }
    // After a refresh on a connected session, wait for the sender's next offer.
    const found = await rest.selectSession(sessionId);
    if (found && !found.row) {
      // RLS shows a receiver only its own sessions.
      setState("error", "This session does not exist or belongs to another receiver.");
      return;
    }
    const row = found?.row;
    const wasConnected = sessionStorage.getItem(connectedKey) === "1" || row?.status === "connected";
    if (row && (row.status === "disconnected" || row.status === "expired")) {
      setState("ended");
      return;
    }
    v.feed = new SessionFeed({
      realtime, rest, sessionId,
      onRow: (r, { backfill }) => enqueueRows([r], backfill),
      onSession: onSessionUpdate,
      onStatus: (s, detail) => log("channel", { status: s, detail }),
    });
    v.feed.onBatch = (rows) => enqueueRows(rows, true);
    if (wasConnected) {
      v.ignoreOffersBefore = pageLoadedAt;
      log("refresh_on_connected_session", {});
      enterReconnecting();
    } else {
      setState("waiting");
    }
    v.feed.start();
    setInterval(pollStats, 1000);
  } catch (e) {
    log("error", { code: e.code, message: e.message });
    setState("error", e.message);
  }
}

main();
