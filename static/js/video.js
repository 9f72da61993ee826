// The table's live video, and the game shown in step with it (docs/video.md).
//
// The video runs some seconds behind the table: camera → encoder → RTMP → packager → 1 s
// segments → the player's buffer. That delay is measured, not guessed: every HLS segment
// carries EXT-X-PROGRAM-DATE-TIME, the studio clock's time of its first frame, so the frame
// on screen has a time (hls.js: playingDate), and delay = serverNow() − that time (clock.js
// keeps serverNow on the server's clock, from welcome and pong).
//
// What waits for the video: a card's identity (hand_revealed), the results (round_settled)
// and the player's own results (bet_settled: outcome and new balance). Each is held until
// the frame on screen is later than the moment the frame reached this page — on the
// server's clock an upper bound of when the server sent it, and the server sends a reveal
// only after the dealer showed the card to the camera — plus MARGIN_MS for the packager's
// clock (below). Frames behind a held one wait too (first in, first out), so the page
// moves through the server's states in the server's order, only later.
// What does not wait: nothing is delayed while nothing is held; the countdown is drawn
// from closes_at on the server's clock, so a round_opened that waited behind the previous
// round's results only shortens the countdown shown — never lengthens it — and a bet is
// judged by when it reaches the server.
// When the video fails, stalls or is paused, nothing is held: the drawn table is the game
// (and stays so while a failed stream is tried again, until its picture plays).
// A round's results stand: the next round_opened waits until RESULT_STAND_MS after the
// results (and the player's own) were shown, so the betting that follows opens later on
// this page, with the countdown still on the server's clock (docs/video.md).

import { t, onLangChange } from "./i18n.js";
import { h, announce } from "./common.js";
import { serverNow } from "./clock.js";

const HLS_MODULE = "../vendor/hls.js/hls.light.min.mjs";
const SPOILERS = new Set(["hand_revealed", "round_settled", "bet_settled", "round_winners"]);
// ffmpeg's HLS packager dates a segment from when it started, which can be later than the
// camera saw its first frame by the encoder-to-packager latency (docs/benchmarks.md measures
// it): holding this much longer keeps a reveal from ever coming before the video's.
export const MARGIN_MS = 300;
const START_TIMEOUT_MS = 12_000;  // no picture by then: fall back to the drawn table
const STALL_MS = 4_000;           // the picture stopped this long: stop holding the game
const RETRY_MS = 15_000;          // a failed stream is tried again (it may come back)
const WATCH_MS = 500;
// How long a round's results and the player's win or loss stand before the next round's
// opening clears them: they come the video's delay late, and the server opens the next
// round on its own clock (docs/video.md, "Results stand").
export const RESULT_STAND_MS = 3_000;
const WIN_SETTLE_MS = 300;        // table.js shows the win this long after bet_settled
// Short-segment live HLS: start two segments behind the live edge and catch up by playing
// slightly faster, never more than five behind.
const HLS_CONFIG = {
  enableWorker: false,  // fMP4 is only remuxed, not transmuxed: no worker needed
  lowLatencyMode: true,
  liveSyncDurationCount: 2,
  liveMaxLatencyDurationCount: 5,
  maxLiveSyncPlaybackRate: 1.1,
  backBufferLength: 10,
};

/** The table page's hook: a video beside `felt`, and `conn`'s frames in step with it. */
export function mountVideo(conn, felt) {
  const video = new TableVideo(conn, felt);
  conn.setGate(video.gate);
  window.livetableVideo = video;  // for the tests and the benchmark
  return video;
}

class TableVideo {
  constructor(conn, felt) {
    this.conn = conn;
    this.url = null;
    this.state = "off";        // off (no stream) | loading | playing | stalled | failed
    this.reason = "";
    this.delayMs = null;
    this.retrying = false;     // loading a stream that failed: the game is not held meanwhile
    this.queue = [];           // {name, detail, at, spoiler, deliver}
    this.log = [];             // released spoilers: {type, hand, at, released, videoAt}
    this.hls = null;
    this.timer = null;
    this.retryTimer = null;
    this.startTimer = null;
    this.lastTime = -1;
    this.lastAdvance = 0;
    this.standUntil = 0;       // Date.now() before which no round_opened is shown
    this.gate = (name, detail, deliver) => this._gate(name, detail, deliver);
    this._build(felt);
    setInterval(() => this._watch(), WATCH_MS);
    onLangChange(() => this._render());
  }

  // ------------------------------------------------------------------ the delay line

  _gate(name, detail, deliver) {
    const at = serverNow();
    if (name === "welcome") { this._welcome(detail, at, deliver); return; }
    const type = detail && detail.type;
    const spoiler = SPOILERS.has(type) && (name === "event" || type === "bet_settled");
    const stand = name === "event" && type === "round_opened" && Date.now() < this.standUntil;
    if (!this.queue.length && !(spoiler && this._holding()) && !stand) { deliver(); return; }
    this.queue.push({ name, detail, at, spoiler, deliver });
    this._pump();
  }

  _welcome(detail, at, deliver) {
    const msg = detail.msg;
    const stream = msg.table && msg.table.stream;
    this._load(stream && typeof stream.hls === "string" ? stream.hls : null);
    if (msg.resumed) {  // the missed events follow, through the line
      if (!this.queue.length) deliver(); else this.queue.push({ name: "welcome", detail, at, spoiler: false, deliver });
      return;
    }
    // A fresh snapshot replaces every table event still waiting; the player's own results
    // still wait for the video.
    this.queue = this.queue.filter((q) => q.name === "message");
    const snap = msg.table;
    const hands = snap.hands || [];
    const results = snap.results || [];
    if (!this._holding() || (!hands.length && !results.length)) { deliver(); this._pump(); return; }
    // Joined mid-reveal: the snapshot's cards and results were sent at or before
    // server_time; show the table without them, and them when the video reaches that time.
    const bare = {
      ...snap, hands: [], results: [],
      roadmap: (snap.roadmap || []).filter((r) => r.round_id !== snap.round_id),
      phase: snap.phase === "settled" ? "revealing" : snap.phase,
    };
    deliver({ ...detail, msg: { ...msg, table: bare } });
    const when = typeof msg.server_time === "number" ? Math.max(msg.server_time, 0) : at;
    const later = [
      ...hands.map((hv) => ({ type: "hand_revealed", table: snap.id, round_id: snap.round_id, ...hv })),
      ...(results.length ? [{ type: "round_settled", table: snap.id, round_id: snap.round_id,
        results, last_round: !!snap.last_round }] : []),
    ];
    for (const ev of later) {
      // Dispatched as the connection's own "event" (dispatchEvent itself is not gated).
      this.queue.push({ name: "event", detail: ev, at: when, spoiler: true,
        deliver: () => this.conn.dispatchEvent(new CustomEvent("event", { detail: ev })) });
    }
    this._pump();
  }

  // A stream tried again after it failed holds nothing while it loads: the player has been
  // following the drawn table, which must not stop for the retry (up to START_TIMEOUT_MS).
  _holding() { return this.state === "playing" || (this.state === "loading" && !this.retrying); }

  /** The studio-clock time (epoch ms) of the frame on screen, or null if unknown. */
  videoNow() {
    if (this.hls) {
      const d = this.hls.playingDate;
      return d && !Number.isNaN(d.getTime()) ? d.getTime() : null;
    }
    const v = this.videoEl;
    const start = v.getStartDate && v.getStartDate();
    if (start && !Number.isNaN(start.getTime()) && v.currentTime > 0) return start.getTime() + v.currentTime * 1000;
    return null;
  }

  _pump() {
    clearTimeout(this.timer);
    this.timer = null;
    while (this.queue.length) {
      const head = this.queue[0];
      const standing = this.standUntil - Date.now();
      if (head.name === "event" && head.detail.type === "round_opened" && standing > 0) {
        this.timer = setTimeout(() => this._pump(), standing + 5);
        return;
      }
      if (head.spoiler && this._holding()) {
        const shown = this.state === "playing" ? this.videoNow() : null;
        if (shown === null || shown < head.at + MARGIN_MS) {
          const wait = shown === null ? 200 : head.at + MARGIN_MS - shown + 5;
          this.timer = setTimeout(() => this._pump(), Math.min(Math.max(wait, 5), 1000));
          return;
        }
      }
      this.queue.shift();
      if (head.spoiler) {
        this.log.push({ type: head.detail.type, hand: head.detail.hand || null, at: head.at,
          released: serverNow(), videoAt: this.state === "playing" ? this.videoNow() : null,
          state: this.state });
        if (this.log.length > 200) this.log.shift();
        // Results shown while the picture leads the game: keep them up (RESULT_STAND_MS).
        const type = head.detail.type;
        if (this._holding() && (type === "round_settled" || type === "bet_settled")) {
          const extra = type === "bet_settled" ? WIN_SETTLE_MS : 0;
          this.standUntil = Math.max(this.standUntil, Date.now() + RESULT_STAND_MS + extra);
        }
      }
      head.deliver();
    }
  }

  // ------------------------------------------------------------------ the player

  _build(felt) {
    this.videoEl = h("video", { class: "video__picture", "data-testid": "video-el", muted: true,
      playsinline: true, autoplay: true, "webkit-playsinline": true, disablepictureinpicture: true });
    this.videoEl.muted = true;  // the attribute alone does not mute for autoplay everywhere
    this.unmuteBtn = h("button", { type: "button", class: "btn btn--small video__unmute",
      "data-testid": "video-unmute", "aria-pressed": "false" });
    this.unmuteBtn.addEventListener("click", () => {
      this.videoEl.muted = !this.videoEl.muted;
      if (!this.videoEl.muted) this.videoEl.play().catch(() => {});
      this._render();
    });
    // Not a live region: the delay it shows changes every half second. A failure is
    // announced once instead (_set).
    this.statusEl = h("figcaption", { class: "video__status small", "data-testid": "video-status" });
    this.figure = h("figure", { class: "video", "data-testid": "video", hidden: true },
      this.videoEl, this.unmuteBtn, this.statusEl);
    this.stage = h("div", { class: "stage", "data-testid": "stage" });
    felt.before(this.stage);
    this.stage.append(this.figure, felt);
    for (const ev of ["playing", "timeupdate"]) {
      this.videoEl.addEventListener(ev, () => this._onPicture());
    }
    this.videoEl.addEventListener("error", () => this._fail("media error"));
    this._render();
  }

  async _load(url) {
    if (url === this.url && this.state !== "failed") return;
    this.retrying = url === this.url && this.state === "failed";
    this._teardown();
    this.url = url;
    if (!url) { this._set("off"); this._pump(); return; }
    this._set("loading");
    this.startTimer = setTimeout(() => this._fail("no picture"), START_TIMEOUT_MS);
    const v = this.videoEl;
    let Hls = null;
    if (window.MediaSource || window.ManagedMediaSource) {
      try { Hls = (await import(HLS_MODULE)).default; } catch { Hls = null; }
    }
    if (url !== this.url) return;  // replaced meanwhile
    if (Hls && Hls.isSupported()) {
      const hls = new Hls(HLS_CONFIG);
      this.hls = hls;
      hls.on(Hls.Events.ERROR, (_e, data) => {
        if (data.fatal && this.hls === hls) this._fail(`${data.type}: ${data.details}`);
      });
      hls.loadSource(url);
      hls.attachMedia(v);
    } else if (v.canPlayType("application/vnd.apple.mpegurl")) {
      v.src = url;  // Safari on iPhone before ManagedMediaSource: its own HLS
    } else {
      this._fail("this browser plays no HLS");
      return;
    }
    v.play().catch(() => { /* autoplay refused: the picture starts on the first tap */ });
  }

  _teardown() {
    clearTimeout(this.startTimer);
    clearTimeout(this.retryTimer);
    if (this.hls) { this.hls.destroy(); this.hls = null; }
    const v = this.videoEl;
    if (v.getAttribute("src")) { v.removeAttribute("src"); v.load(); }
    this.lastTime = -1;
    this.delayMs = null;
  }

  _onPicture() {
    const v = this.videoEl;
    if (v.currentTime !== this.lastTime) { this.lastTime = v.currentTime; this.lastAdvance = Date.now(); }
    if ((this.state === "loading" || this.state === "stalled") && !v.paused && this.videoNow() !== null) {
      clearTimeout(this.startTimer);
      this._set("playing");
      this._pump();
    }
  }

  _watch() {
    if (this.state !== "playing" && this.state !== "stalled") return;
    const v = this.videoEl;
    if (v.currentTime !== this.lastTime) { this.lastTime = v.currentTime; this.lastAdvance = Date.now(); }
    const stuck = v.paused || Date.now() - this.lastAdvance > STALL_MS;
    if (stuck && this.state === "playing") { this._set("stalled"); this._pump(); return; }
    if (!stuck && this.state === "stalled") this._onPicture();
    const shown = this.videoNow();
    this.delayMs = shown === null ? null : Math.max(0, Math.round(serverNow() - shown));
    this._render();
  }

  _fail(reason) {
    if (this.state === "off") return;
    this._teardown();
    this.reason = reason;
    this._set("failed");
    this._pump();  // nothing is held any more: the drawn table shows the game
    const url = this.url;
    this.retryTimer = setTimeout(() => { if (this.url === url) this._load(url); }, RETRY_MS);
  }

  _set(state) {
    const was = this.state;
    this.state = state;
    if (state === "failed" && was !== "failed") announce(t("video.failed"));
    this._render();
  }

  _render() {
    const f = this.figure;
    f.hidden = this.state === "off";
    f.dataset.state = this.state;
    f.dataset.delayMs = this.delayMs === null ? "" : String(this.delayMs);
    this.stage.dataset.video = this.state === "off" || this.state === "failed" ? "off" : "on";
    f.setAttribute("aria-label", t("video.label"));
    const muted = this.videoEl.muted;
    this.unmuteBtn.textContent = muted ? t("video.unmute") : t("video.mute");
    this.unmuteBtn.setAttribute("aria-pressed", muted ? "false" : "true");
    this.unmuteBtn.hidden = this.state !== "playing" && this.state !== "stalled";
    let status = "";
    if (this.state === "loading") status = t("video.loading");
    else if (this.state === "failed") status = t("video.failed");
    else if (this.state === "playing" && this.delayMs !== null) {
      status = t("video.delay", { s: (this.delayMs / 1000).toFixed(1) });
    }
    if (this.statusEl.textContent !== status) this.statusEl.textContent = status;
  }
}
