// One websocket to the table, kept alive.
//
// Reconnects by itself with exponential backoff and full jitter (so a restarted server is
// not hit by every browser at the same instant), and resumes: it remembers the epoch/seq of
// the last table event it delivered and sends them in the next hello. Table events must
// arrive with seq +1 each; a gap means frames were lost, so it reconnects with resume
// rather than showing a table that is silently wrong. Frames it sends while the socket is
// down are not queued here: the page decides what to resend (bets keep their bet_id).
//
// Silence. A network can drop a connection without a word (a phone losing its signal: no
// FIN, no `offline` event), and the socket then looks open for minutes. The server sends a
// `heartbeat {interval_ms}` whenever a table is quiet for that long, so a frame of some kind
// arrives at least every interval: no frame for SILENCE_BEATS intervals (plus slack for a
// busy network) means the connection is gone — about 4 s with the default 1.5 s beat. The
// server sends one right after the welcome, so the interval is known from the start; from a
// server that sends none, the old 30 s limit applies. A socket that is not welcomed within HANDSHAKE_LIMIT_MS is given up
// too: a dead network also swallows new connections.

import * as clock from "./clock.js";

const BACKOFF_BASE_MS = 500;
const BACKOFF_CAP_MS = 15_000;
const PING_EVERY_MS = 10_000;
const SILENCE_LIMIT_MS = 30_000;
const SILENCE_BEATS = 2;
const SILENCE_SLACK_MS = 1_000;
const HANDSHAKE_LIMIT_MS = 6_000;
const TICK_MS = 250;
// Errors after which retrying the same hello cannot help.
const FATAL_CODES = new Set([
  "bad_token", "invalid_token", "token_expired", "unauthorized", "forbidden",
  "not_a_dealer", "unknown_table", "bad_version", "unsupported_version",
]);

export function wsUrl(path) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}${path}`;
}

export class Connection extends EventTarget {
  /**
   * @param {object} o
   * @param {string} o.path   "/ws" or "/ws/dealer"
   * @param {string} o.table  table id
   * @param {() => (string|null)} [o.token]  read at each (re)connect
   * @param {boolean} [o.resume]  send resume points (players/viewers)
   */
  constructor({ path, table, token = () => null, resume = true }) {
    super();
    this.path = path;
    this.table = table;
    this.token = token;
    this.resumeEnabled = resume;
    this.ws = null;
    this.state = "idle";
    this.attempt = 0;
    this.epoch = null;
    this.seq = null;
    this.welcomed = false;
    this.everWelcomed = false;
    this.stopped = false;
    this.retryTimer = null;
    this.retryAt = null;
    this.lastFrameAt = 0;
    this.openedAt = 0;
    this.silenceLimit = SILENCE_LIMIT_MS;
    this.pingTimer = null;
    this.gate = null;
    this._onOnline = () => { if (!this.stopped) this._connectNow(); };
    this._onOffline = () => {
      if (this.stopped) return;
      this._drop("offline");
      this._setState("offline");
    };
  }

  start() {
    this.stopped = false;
    addEventListener("online", this._onOnline);
    addEventListener("offline", this._onOffline);
    this.pingTimer = setInterval(() => this._tick(), TICK_MS);
    this._connectNow();
  }

  stop() {
    this.stopped = true;
    removeEventListener("online", this._onOnline);
    removeEventListener("offline", this._onOffline);
    clearInterval(this.pingTimer);
    clearTimeout(this.retryTimer);
    this._drop("stopped");
    this._setState("closed");
  }

  /** Switch table: a fresh start, no resume point. */
  setTable(table) {
    this.table = table;
    this.epoch = this.seq = null;
    this.everWelcomed = false;
    if (!this.stopped) this._connectNow();
  }

  /** Send a frame if the socket is open and welcomed; false otherwise. */
  send(frame) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN || !this.welcomed) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  get online() { return this.state === "online"; }

  /** Force a reconnect now (keeps the resume point). */
  reconnect(reason = "manual") {
    this._drop(reason);
    this._connectNow();
  }

  _setState(state, extra = {}) {
    this.state = state;
    this.dispatchEvent(new CustomEvent("state", { detail: { state, attempt: this.attempt, ...extra } }));
  }

  /**
   * Put something between the socket and the page's listeners: gate(name, detail, deliver)
   * must call deliver() — now, or later and in order — for every welcome, event and message
   * (video.js holds reveals until the table's video shows them). deliver(other) dispatches
   * `other` instead of `detail`.
   */
  setGate(gate) { this.gate = gate; }

  _emit(name, detail) {
    const deliver = (d = detail) => this.dispatchEvent(new CustomEvent(name, { detail: d }));
    if (this.gate && (name === "welcome" || name === "event" || name === "message")) {
      this.gate(name, detail, deliver);
    } else {
      deliver();
    }
  }

  _drop(reason) {
    const ws = this.ws;
    this.ws = null;
    this.welcomed = false;
    if (ws) {
      ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
      try { ws.close(1000, reason); } catch { /* already closed */ }
    }
  }

  _connectNow() {
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.retryAt = null;
    this._drop("reconnect");
    if (navigator.onLine === false) { this._setState("offline"); this._scheduleRetry(); return; }
    this._setState(this.everWelcomed ? "reconnecting" : "connecting");
    let ws;
    try { ws = new WebSocket(wsUrl(this.path)); } catch { this._scheduleRetry(); return; }
    this.ws = ws;
    this.openedAt = Date.now();
    ws.onopen = () => {
      const hello = { type: "hello", v: 1, table: this.table };
      const token = this.token();
      if (token) hello.token = token;
      if (this.resumeEnabled && this.epoch !== null && this.seq !== null) {
        hello.resume = { epoch: this.epoch, seq: this.seq };
      }
      this.lastFrameAt = Date.now();
      ws.send(JSON.stringify(hello));
    };
    ws.onmessage = (m) => this._onFrame(m.data);
    ws.onerror = () => { /* onclose follows */ };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.welcomed = false;
      this._emit("closed", { code: ev.code, reason: ev.reason });
      if (!this.stopped && this.state !== "fatal") this._scheduleRetry();
    };
  }

  _scheduleRetry() {
    if (this.stopped || this.retryTimer) return;
    const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** this.attempt);
    const delay = Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
    this.attempt += 1;
    this.retryAt = Date.now() + delay;
    if (this.state !== "offline") this._setState("reconnecting", { retryAt: this.retryAt });
    this.retryTimer = setTimeout(() => { this.retryTimer = null; this._connectNow(); }, delay);
  }

  _tick() {
    if (!this.ws) return;
    const now = Date.now();
    if (!this.welcomed && now - this.openedAt > HANDSHAKE_LIMIT_MS) {
      this._lost("handshake");
      return;
    }
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (this.welcomed && now - this.lastFrameAt > this.silenceLimit) { this._lost("silence"); return; }
    if (this.welcomed && now - (this._lastPing || 0) >= PING_EVERY_MS) this.ping();
  }

  /** The connection is gone without a close: drop it, say so, and retry with backoff. */
  _lost(reason) {
    this._drop(reason);
    this._scheduleRetry();
  }

  ping() {
    this._lastPing = Date.now();
    this.send({ type: "ping", t: this._lastPing });
  }

  _onFrame(data) {
    const receivedAt = Date.now();
    this.lastFrameAt = receivedAt;
    let msg;
    try { msg = JSON.parse(data); } catch { return; }
    if (!msg || typeof msg.type !== "string") return;

    if (msg.type === "welcome") {
      clock.fromWelcome(msg.server_time, receivedAt);
      const reconnect = this.everWelcomed;
      if (!msg.resumed) { this.epoch = msg.epoch; this.seq = msg.seq; }
      this.welcomed = true;
      this.everWelcomed = true;
      this.attempt = 0;
      this._setState("online");
      this._emit("welcome", { msg, reconnect });
      // Two quick pings to get a good clock sample early.
      this.ping();
      setTimeout(() => this.welcomed && this.ping(), 700);
      return;
    }
    if (msg.type === "heartbeat") {
      if (typeof msg.interval_ms === "number" && msg.interval_ms > 0) {
        this.silenceLimit = SILENCE_BEATS * msg.interval_ms + SILENCE_SLACK_MS;
      }
      return;
    }
    if (msg.type === "pong") {
      clock.fromPong(msg.t, msg.server_time, receivedAt);
      this._emit("pong", msg);
      return;
    }
    if (msg.type === "session_ended") {
      // The operator's session is over (the operator ended it, or its time limit came):
      // its token is refused from now on, so no reconnect.
      this._emit("fatal", { code: "session_ended", reason: msg.reason });
      this._drop("fatal");
      this._setState("fatal", { code: "session_ended" });
      return;
    }
    if (msg.type === "error" && !this.welcomed && FATAL_CODES.has(msg.code)) {
      this._emit("fatal", msg);
      this._drop("fatal");
      this._setState("fatal", { code: msg.code });
      return;
    }
    const isTableEvent = typeof msg.seq === "number" && typeof msg.epoch === "number"
      && typeof msg.table === "string";
    if (isTableEvent) {
      if (this.epoch === null || this.seq === null) {
        this.epoch = msg.epoch; this.seq = msg.seq;
      } else if (msg.epoch === this.epoch && msg.seq <= this.seq) {
        return; // already seen (a replay overlapping what we had)
      } else if (msg.epoch !== this.epoch || msg.seq !== this.seq + 1) {
        this._emit("gap", { have: { epoch: this.epoch, seq: this.seq }, got: msg });
        this.reconnect("gap");
        return;
      } else {
        this.seq = msg.seq;
      }
      this._emit("event", msg);
      return;
    }
    this._emit("message", msg);
  }
}
