// HTTP helpers and the demo guest, whose token the browser keeps so that the same
// guest (and balance) comes back after a reload or a disconnect.

const GUEST_KEY = "livetable.guest";

export async function getJSON(url, { token } = {}) {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const r = await fetch(url, { headers, cache: "no-store" });
  if (!r.ok) {
    const err = new Error(`${r.status} ${r.statusText}`);
    err.status = r.status;
    throw err;
  }
  return r.json();
}

export function storedGuest() {
  try { return JSON.parse(localStorage.getItem(GUEST_KEY) || "null"); } catch { return null; }
}

export function forgetGuest() { localStorage.removeItem(GUEST_KEY); }

/** The kept guest, or a new one from POST /api/guest. Null when the server has none. */
export async function ensureGuest() {
  const kept = storedGuest();
  if (kept && kept.token) return kept;
  const r = await fetch("/api/guest", { method: "POST", headers: { Accept: "application/json" } });
  if (!r.ok) return null;
  const g = await r.json();
  if (!g || !g.token) return null;
  localStorage.setItem(GUEST_KEY, JSON.stringify({ token: g.token, player: g.player }));
  return g;
}

export function rememberPlayer(player) {
  const kept = storedGuest();
  if (kept && player) localStorage.setItem(GUEST_KEY, JSON.stringify({ ...kept, player }));
}

export function newBetId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}
