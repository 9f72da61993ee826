// The server's clock, as seen from here.
//
// Countdowns end at `closes_at`, an absolute time on the server's clock, so the browser
// needs offset = server clock − local clock. The welcome frame gives a first estimate
// (server_time − local receive time: off by at most the one-way latency); every pong
// refines it with the NTP midpoint, server_time − (sent + received) / 2, keeping the
// sample with the shortest round trip among the recent ones, the least skewed by queueing.

let offset = 0;
let samples = []; // {rtt, offset}
const KEEP = 8;

/** Milliseconds on the server's clock, now. */
export function serverNow() { return Date.now() + offset; }
export function clockOffset() { return offset; }
export function bestRtt() {
  return samples.length ? Math.min(...samples.map((s) => s.rtt)) : null;
}

/** First estimate from a frame carrying server_time (welcome). */
export function fromWelcome(serverTime, receivedAt = Date.now()) {
  if (typeof serverTime !== "number") return;
  if (!samples.length) offset = serverTime - receivedAt;
}

/** Refine from a pong: t = our Date.now() when the ping left. */
export function fromPong(t, serverTime, receivedAt = Date.now()) {
  if (typeof t !== "number" || typeof serverTime !== "number") return;
  const rtt = receivedAt - t;
  if (rtt < 0 || rtt > 30_000) return;
  samples.push({ rtt, offset: serverTime - (t + receivedAt) / 2 });
  if (samples.length > KEEP) samples = samples.slice(-KEEP);
  const best = samples.reduce((a, b) => (b.rtt < a.rtt ? b : a));
  offset = best.offset;
}
