// Page bootstrap shared by /dashboard and /viewer/:id: configuration from the
// gateway's generated /web/config.js, the signed-in identity, REST and Realtime.

import { Auth } from "./auth.js";
import { Rest } from "./rest.js";
import { Realtime } from "./realtime.js";

export async function boot() {
  const config = window.CASTD_CONFIG;
  if (!config || !config.supabaseUrl || !config.supabaseKey) {
    throw new Error("The stack did not provide /web/config.js (CASTD_CONFIG).");
  }
  const auth = new Auth(config);
  await auth.start();
  const rest = new Rest(config, auth);
  const realtime = new Realtime(config, auth);
  realtime.connect();
  return { config, auth, rest, realtime };
}

export const $ = (id) => document.getElementById(id);

/** "482913" → "482 913" (spec §4: the receiver shows the digits grouped). */
export function groupPin(pin) {
  const d = String(pin).replace(/\D/g, "");
  return d.length === 6 ? `${d.slice(0, 3)} ${d.slice(3)}` : d;
}

/** Query-string number with a default, for test-compressed durations. */
export function numberParam(name, fallback) {
  const v = new URLSearchParams(location.search).get(name);
  const n = v === null ? NaN : Number(v);
  return Number.isFinite(n) && n >= 0 ? n : fallback;
}

export function showError(el, e) {
  el.textContent = e.code ? `${e.message} (${e.code})` : e.message || String(e);
  el.hidden = false;
}
