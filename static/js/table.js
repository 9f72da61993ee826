// The table page: watch a round, bet on it, see it settle.
//
// State comes from two places and is never guessed: the table (snapshot + table events,
// through state.js) and the player's own frames (bet_accepted / bet_rejected /
// bet_settled, and the balance they carry). Bets go through three stages here:
//   draft    — chips placed on spots, not yet sent (undo, clear, rebet, double work here);
//   pending  — sent with a fresh bet_id, all of one Confirm in one slip (place_bets, a
//              fresh slip_id: taken whole or not at all), no answer yet. If the socket
//              drops, the slip is sent again after the next welcome with the SAME slip_id
//              and bet_ids, so the server takes it once;
//   confirmed — slip_accepted; shown on the spot until the next round opens.
// Chips still in draft when the countdown ends were never sent: they stay on the spot marked
// "not placed" until the next round, and a notice says so (or, with auto-confirm on, they
// are sent just before the end). Messages about bets show at the top of the table (a toast),
// where the player is looking when they tap a spot.
//
// The connection: while it is down the felt is covered by an overlay that says what became
// of the player's bets (sent and unanswered, confirmed, or chips never sent), and the
// countdown stands still — the table's time is unknown until it is back.

import { t, lang, onLangChange } from "./i18n.js";
import { $, $$, h, money, chipMoney, currencyDecimals, setCurrency, signed, spotName, handLabel, announce, initPage, bindConnection } from "./common.js";
import { Connection } from "./conn.js";
import { serverNow } from "./clock.js";
import { fromSnapshot, applyEvent, POSITIONS, SPOTS, isPairSpot, deductedFor, spotOdds, rulesPayouts } from "./state.js";
import { renderStats } from "./stats.js";
import { cardEl, cardBackEl } from "./cards.js";
import { renderRoadmap, roadmapLegend } from "./roadmap.js";
import { getJSON, ensureGuest, storedGuest, forgetGuest, rememberPlayer, newBetId } from "./api.js";
import { noteSnapshot, noteTableEvent } from "./verify.js";
import { mountVideo } from "./video.js";
import { mountChat } from "./chat.js";
import { launchedToken, forgetSession, withCurrency } from "./operator.js";
import { bindAtmosphere, play, say, audioContext } from "./atmosphere.js";

const CHIP_VALUES = [5, 10, 25, 50, 100, 500, 1000, 5000, 10000];
const RESUME_WINDOW_MS = 2500;
// Auto-confirm sends the draft this long before the countdown ends: the server judges a bet
// by when it arrived, so this covers a slow network with room to spare.
const AUTO_CONFIRM_MS = 1200;
const WIN_SHOWN_MS = 6000;
const WIN_SETTLE_MS = 300;
const PREF_AUTO_CONFIRM = "livetable.autoConfirm";
const PREF_SOUND = "livetable.sound";

const params = new URLSearchParams(location.search);
let tableId = params.get("table");

let st = null;              // table state (state.js)
let player = null;          // {id, name, balance}
let token = null;
let conn = null;
let chip = null;            // selected chip value
let justRevealed = null;    // hand to animate
const bets = {
  round_id: null,
  confirmed: {},            // spot → amount accepted this round
  pending: new Map(),       // bet_id → {bet_id, round_id, spot, amount, sent}
  draft: {},                // spot → amount
  history: [],              // previous drafts, for undo
  last: {},                 // the previous round's confirmed bets, for rebet
  settled: [],              // bet_settled frames of the shown round
  unsettled: new Map(),     // bet_id → accepted bet not yet settled (any round)
  unplaced: {},             // spot → draft amount the countdown ended on (never sent)
  autoTried: null,          // the draft auto-confirm last tried (tried once each)
};
const prefs = { autoConfirm: readPref(PREF_AUTO_CONFIRM) === "1", sound: readPref(PREF_SOUND) === "on" };
let winShown = null;        // round whose result is on the felt
let winChimed = null;       // round whose win was announced (and its sound played)
let winTimer = null;
let winDue = null;
let audio = null;           // the AudioContext, made on the first user gesture that needs it
// Another tab of the same player learns of balance changes this tab causes, and vice versa.
const balanceChannel = "BroadcastChannel" in self ? new BroadcastChannel("livetable.balance") : null;
let balanceAt = 0;          // server time of the balance shown
let resumeWindow = null;    // {settled: [], timer} while a reconnect's replay arrives
let catchUpHead = null;     // welcome's head seq until a live event (seq > head) arrives
const seenSettled = new Set(); // bet_ids whose bet_settled this page has handled
let newShoeUntil = 0;        // an auto shoe shuffles at once: show "new shoe" for a moment
let online = null;           // players online at the table (the server's presence frame)

// ---------------------------------------------------------------- bootstrap

async function main() {
  initPage({ active: "table", connection: true });
  buildLayout();
  onLangChange(() => { buildChips(); render(); });

  if (!tableId) {
    try {
      const { tables } = await getJSON("/api/tables");
      if (tables && tables.length) tableId = tables[0].id;
    } catch { /* the lobby link below still works */ }
    if (!tableId) { $("#table-name").textContent = t("table.none"); return; }
    history.replaceState(null, "", `?table=${encodeURIComponent(tableId)}`);
  }

  token = launchedToken();  // a session an operator launched, else a demo guest
  if (!token) {
    try {
      const g = await ensureGuest();
      if (g) { token = g.token; player = g.player || null; }
    } catch { token = null; }
  }
  renderWallet();

  conn = new Connection({ path: "/ws", table: tableId, token: () => token });
  mountVideo(conn, $("#felt"));  // the table's video; reveals and results in step with it
  mountChat(conn, $("#chat"), { presenter: $("#presenter") });  // the chat, who deals
  $("#chat").append(h("button", { type: "button", class: "btn btn--small chat__close", id: "chat-close",
    "data-testid": "close-chat", "data-i18n": "tabs.close", text: t("tabs.close") }));
  $("#chat-close").addEventListener("click", () => showChat(false));
  bindConnection(conn);
  conn.addEventListener("welcome", (e) => onWelcome(e.detail.msg, e.detail.reconnect));
  conn.addEventListener("event", (e) => onTableEvent(e.detail));
  conn.addEventListener("message", (e) => onPrivate(e.detail));
  conn.addEventListener("fatal", (e) => onFatal(e.detail));
  conn.addEventListener("state", () => { renderConnection(); renderControls(); renderWallet(); });
  conn.addEventListener("event", () => markSeen());
  conn.addEventListener("pong", () => markSeen());
  conn.start();

  setInterval(tickCountdown, 200);
  document.addEventListener("keydown", onKey);
  if (balanceChannel) balanceChannel.onmessage = (e) => onOtherTabBalance(e.data);
}

function readPref(key) { try { return localStorage.getItem(key); } catch { return null; } }
function writePref(key, value) { try { localStorage.setItem(key, value); } catch { /* private mode */ } }

// ---------------------------------------------------------------- layout

function buildLayout() {
  const felt = $("#felt");
  const banker = handBox("BANKER");
  banker.classList.add("hand--banker");
  const positions = h("div", { class: "positions" });
  for (const p of POSITIONS) {
    const n = p.slice(1);
    positions.append(h("div", { class: "position", "data-testid": `position-${p}` },
      handBox(p),
      h("div", { class: "result", id: `result-${p}`, "data-testid": `result-${p}`, "aria-live": "off" }),
      spotButton(p, n, false),
      spotButton(`${p}_PAIR`, n, true)));
  }
  const limits = h("div", { class: "limits", id: "limits", "data-testid": "limits" });
  felt.replaceChildren(banker, positions, limits);
  $("#roadmap-legend").replaceChildren(roadmapLegend());
  buildChips();

  $("#sound").addEventListener("click", toggleSound);
  const auto = $("#auto-confirm");
  auto.checked = prefs.autoConfirm;
  auto.addEventListener("change", () => {
    prefs.autoConfirm = auto.checked;
    writePref(PREF_AUTO_CONFIRM, auto.checked ? "1" : "0");
  });
  $("#guest-reset").addEventListener("click", resetGuest);
  bindAtmosphere({ effects: $("#atmo-effects"), countdown: $("#atmo-countdown"), voice: $("#atmo-voice") });

  $("#btn-undo").addEventListener("click", undo);
  $("#btn-clear").addEventListener("click", clearDraft);
  $("#btn-rebet").addEventListener("click", rebet);
  $("#btn-double").addEventListener("click", double);
  $("#btn-confirm").addEventListener("click", confirmBets);
  $("#resume-dismiss").addEventListener("click", () => { $("#resume-summary").hidden = true; });
  $("#reality-ack").addEventListener("click", () => {
    conn.send({ type: "reality_check_ack" });
    $("#reality-check").hidden = true;
  });
  $("#btn-roadmap").addEventListener("click", () => showRoadmap(document.body.dataset.sheet !== "roadmap"));
  $("#roadmap-close").addEventListener("click", () => showRoadmap(false));
  $("#btn-chat").addEventListener("click", () => showChat(document.body.dataset.sheet !== "chat"));
}

/** "Chat" on a phone: held upright the panel is below the betting screen (scrolled to);
 * held sideways it is a sheet beside the video (opened and closed). */
function showChat(open) {
  if (open) document.body.dataset.sheet = "chat";
  else if (document.body.dataset.sheet === "chat") delete document.body.dataset.sheet;
  $("#btn-chat").setAttribute("aria-expanded", open ? "true" : "false");
  $("#btn-roadmap").setAttribute("aria-expanded", "false");
  if (open) {
    $("#chat").scrollIntoView({ block: "start", behavior: matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth" });
    $("[data-testid=chat-input]").focus({ preventScroll: true });
  } else $("#btn-chat").focus({ preventScroll: true });
}

/** "Roadmap & stats" on a phone: held upright the panel is just below the betting screen
 * (scrolled to); held sideways it is a sheet over the video (opened and closed). */
function showRoadmap(open) {
  if (open) document.body.dataset.sheet = "roadmap";
  else delete document.body.dataset.sheet;
  $("#btn-roadmap").setAttribute("aria-expanded", open ? "true" : "false");
  $("#btn-chat").setAttribute("aria-expanded", "false");
  const panel = $("#roadmap-panel");
  if (open) {
    panel.scrollIntoView({ block: "start", behavior: matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth" });
    panel.focus({ preventScroll: true });
  } else $("#btn-roadmap").focus({ preventScroll: true });
}

function handBox(hand) {
  return h("div", { class: "hand", id: `hand-${hand}`, "data-testid": `hand-${hand}`, "data-hand": hand },
    h("div", { class: "hand__title" }),
    h("div", { class: "hand__cards", "data-testid": `cards-${hand}` }),
    h("div", { class: "hand__value", "data-testid": `value-${hand}` }));
}

function spotButton(spot, n, pair) {
  const b = h("button", {
    type: "button", class: `spot${pair ? " spot--pair" : ""}`, id: `spot-${spot}`,
    "data-testid": `spot-${spot}`, "data-spot": spot,
  },
  h("span", { class: "spot__name" }),
  pair ? h("span", { class: "spot__kind", "data-i18n": "spot.kind_pair", text: t("spot.kind_pair") }) : null,
  h("span", { class: "spot__odds" }),
  h("span", { class: "spot__stake", "data-testid": `stake-${spot}` }));
  b.addEventListener("click", () => placeChip(spot));
  return b;
}

/** The limits this player's bets are held to: their session's, when their operator gives
 *  its currency its own (welcome.player.limits, minor units), else the table's. */
function betLimits() {
  return (player && player.limits) || (st ? st.limits : { min: 10, max: 5000, pair_min: 10, pair_max: 1000 });
}

function allowedChips() {
  if (player && player.chips && player.chips.length) return player.chips;  // the operator's
  const lim = betLimits();
  const lo = Math.min(lim.min, lim.pair_min ?? lim.min);
  const hi = Math.max(lim.max, lim.pair_max ?? lim.max);
  let chips = CHIP_VALUES.filter((v) => v >= lo && v <= hi);
  if (!chips.length) chips = [lo];
  if (chips.length > 6) chips = chips.slice(0, 6);
  return chips;
}

function buildChips() {
  const chips = allowedChips();
  if (!chips.includes(chip)) chip = chips.includes(100) ? 100 : chips[0];
  const tray = $("#chips");
  tray.replaceChildren(...chips.map((v, i) => {
    const b = h("button", {
      type: "button", role: "radio", class: `chip chip--${i}`, "data-testid": `chip-${v}`,
      "data-value": String(v), "aria-checked": v === chip ? "true" : "false",
      "aria-label": t("chip.aria", { amount: money(v) }), tabindex: v === chip ? "0" : "-1",
    }, h("span", { text: compactMoney(v) }));
    b.addEventListener("click", () => {
      if (b.dataset.affordable === "none") { warn(t("chip.unaffordable", { amount: money(v) })); return; }
      selectChip(v);
    });
    return b;
  }));
  renderChips();
}

/** Grey out the chips the balance cannot cover (left after the draft): a chip that fits
 * only as a Pair bet (which deducts less than a Player bet, with its withholding) is
 * half-greyed. The multiples are the server's (state.js). */
function renderChips() {
  const left = available() - deducted(bets.draft);
  for (const b of $$("#chips .chip")) {
    const v = Number(b.dataset.value);
    const pairNeeds = deductedFor("P1_PAIR", v);
    const playerNeeds = deductedFor("P1", v);
    const kind = !player ? "all" : Math.min(pairNeeds, playerNeeds) > left ? "none"
      : playerNeeds > left ? "pair" : "all";
    b.dataset.affordable = kind;
    b.setAttribute("aria-disabled", kind === "none" ? "true" : "false");
    const note = kind === "none" ? t("chip.unaffordable", { amount: money(v) })
      : kind === "pair" ? t("chip.pair_only", { amount: money(v) }) : "";
    b.title = note;
    b.setAttribute("aria-label", [t("chip.aria", { amount: money(v) }), note].filter(Boolean).join(". "));
  }
}

/** A chip's face: its value in the session's currency, short (a 1000 THB-minor chip is
 *  "฿10", a 1000 JPY chip "¥1K"); plain amounts without a currency, thousands as K. */
function compactMoney(v) {
  const face = chipMoney(v);
  if (face) return face;
  const major = v / 10 ** currencyDecimals();
  return major >= 1000 ? `${major / 1000}K` : String(major);
}

function selectChip(v) {
  chip = v;
  for (const b of $$("#chips .chip")) {
    const on = Number(b.dataset.value) === v;
    b.setAttribute("aria-checked", on ? "true" : "false");
    b.tabIndex = on ? 0 : -1;
  }
  $("#chips").dataset.selected = String(v);
}

// ---------------------------------------------------------------- server frames

function onWelcome(msg, reconnect) {
  if (msg.player) {
    player = msg.player;
    setCurrency(player.currency);
    rememberPlayer(player);
    balanceAt = msg.server_time || serverNow();
    shareBalance();
  }
  else if (token) {
    // We sent a token and were welcomed as a viewer: it is not valid here any more.
    forgetGuest();
  }
  const snap = msg.table;
  noteSnapshot(snap);  // provably fair shoe: keep the commitment announced (verify.js)
  if (!msg.resumed || !st) {
    const before = st;
    st = fromSnapshot(snap);
    if (before && before.round_id !== st.round_id) newRoundBets(st.round_id, { away: !!reconnect });
    if (!before) bets.round_id = st.round_id;
    if (!reconnect) restoreFromRecord();
  } else {
    // Resumed: the missed events follow and bring us to the server's state.
    st.name = snap.name || st.name;
    st.limits = fromSnapshot(snap).limits;
    st.mode = snap.mode;
  }
  $("#table-name").textContent = st.name;
  buildChips();

  // Slips sent before the drop: send again, same slip_id and bet_ids — taken once.
  const slips = new Map();
  for (const p of bets.pending.values()) {
    p.resent = true;
    if (!slips.has(p.slip_id)) slips.set(p.slip_id, []);
    slips.get(p.slip_id).push(p);
  }
  for (const [slipId, ps] of slips) sendSlip(slipId, ps);

  catchUpHead = msg.seq;
  if (reconnect) openResumeWindow(msg.resumed);
  render();
}

function onFatal(err) {
  if (err.code === "session_ended") {
    // Only the operator can start another session: say why this one ended, and stop.
    forgetSession();
    token = null;
    $("#reality-check").hidden = true;
    const key = `session.ended.${err.reason}`;
    const text = t(key);
    const banner = $("#banner-session-ended");
    banner.textContent = text === key ? t("session.ended", { reason: err.reason || "" }) : text;
    banner.hidden = false;
    return;
  }
  if (token && player && player.currency && ["bad_token", "token_expired"].includes(err.code)) {
    // An operator's session ended: only the operator can start another.
    forgetSession();
    token = null;
    showError(errorText(err.code, err.message));
    return;
  }
  if (token && ["bad_token", "invalid_token", "token_expired", "unauthorized"].includes(err.code)) {
    // The kept guest is gone (e.g. a fresh server): get a new one and come back.
    forgetGuest();
    token = null;
    ensureGuest().then((g) => { if (g) { token = g.token; player = g.player; } conn.setTable(tableId); });
    return;
  }
  showError(errorText(err.code, err.message));
}

function onTableEvent(ev) {
  if (catchUpHead !== null && ev.seq > catchUpHead) catchUpHead = null;  // live from here
  if (!st) return;
  const live = catchUpHead === null;  // no sounds or call-outs for what is caught up on
  const prevRound = st.round_id;
  applyEvent(st, ev);
  noteTableEvent(ev);  // shoe_started: keep its commitment; shoe_revealed: offer to verify
  switch (ev.type) {
    case "round_opened":
      if (ev.round_id !== prevRound) newRoundBets(ev.round_id);
      announce(t("announce.betting_open", { n: ev.round_no }));
      if (live) say(t("voice.place_bets"));
      break;
    case "betting_closed":
      closeDrafts();
      announce(t(`phase.${st.phase}`));
      if (live) say(t("voice.no_more_bets"));
      break;
    case "card_dealt":
      if (live) play("card");
      break;
    case "shoe_shuffling":
      announce(t("banner.new_shoe"));
      break;
    case "shoe_started":
      if (catchUpHead === null) { newShoeUntil = Date.now() + 4000; setTimeout(render, 4100); }
      break;
    case "hand_revealed":
      justRevealed = ev.hand;
      announce(`${spotName(ev.hand)}: ${handLabel(ev.value)}`);
      if (live) play("flip");
      break;
    case "round_settled":
      announce(resultsSentence(ev.results));
      if (live) say(resultsSentence(ev.results));
      // the operator's balance once its credit is in (it is sent right after settlement)
      if (player && player.currency) setTimeout(() => conn.send({ type: "get_balance" }), 1500);
      break;
    case "round_cancelled":
      announce(t("banner.cancelled", { reason: ev.reason || "—" }), { urgent: true });
      break;
    case "table_paused":
      announce(t("banner.paused", { reason: ev.reason || "—" }), { urgent: true });
      break;
    case "table_resumed":
      announce(t("announce.resumed"));
      break;
    default:
      break;
  }
  render();
}

function sendSlip(slipId, ps) {
  conn.send({ type: "place_bets", slip_id: slipId, round_id: ps[0].round_id,
    bets: ps.map((p) => ({ bet_id: p.bet_id, spot: p.spot, amount: p.amount })) });
}

function onPrivate(msg) {
  switch (msg.type) {
    case "slip_accepted":  // each bet of the slip, as its own acceptance
      hideToast("#bet-warning");  // a warning about an earlier draft no longer holds
      for (const b of msg.bets) {
        onPrivate({ type: "bet_accepted", bet_id: b.bet_id, round_id: msg.round_id, spot: b.spot,
          amount: b.amount, deducted: b.deducted, balance: msg.balance });
      }
      return;
    case "slip_rejected": {  // the whole slip: none of its bets was taken
      const mine = [...bets.pending.values()].filter((p) => p.slip_id === msg.slip_id);
      for (const p of mine) bets.pending.delete(p.bet_id);
      const p = mine.find((x) => x.bet_id === msg.bet_id);
      // name the bet that failed, or, when the slip failed as a whole, every bet of it
      const named = p ? [p] : mine;
      const what = named.length
        ? `${named.map((x) => `${spotName(x.spot)} ${money(x.amount)}`).join(", ")}: ` : "";
      const resent = mine.some((x) => x.resent) ? `${t("notice.resent_no")} ` : "";
      showError(what + resent + rejectText(msg.code, msg.message, p));
      break;
    }
    case "bet_accepted": {
      const p = bets.pending.get(msg.bet_id);
      bets.pending.delete(msg.bet_id);
      if (msg.round_id === bets.round_id) {
        bets.confirmed[msg.spot] = (bets.confirmed[msg.spot] || 0) + msg.amount;
      }
      bets.unsettled.set(msg.bet_id, { ...msg });
      // The answer to a resend may be the server's first answer again, with the balance of
      // that moment: trust it only while its round is still the one taking bets.
      if (!(p && p.resent) || msg.round_id === (st && st.round_id)) setBalance(msg.balance);
      if (p && p.resent) {
        notice(t("notice.resent_ok", { spot: spotName(msg.spot), amount: money(msg.amount) }));
      }
      if (p || msg.round_id === bets.round_id) {
        announce(t("announce.accepted", { spot: spotName(msg.spot), amount: money(msg.amount),
          deducted: money(msg.deducted) }));
      }
      break;
    }
    case "bet_rejected": {
      const p = bets.pending.get(msg.bet_id);
      bets.pending.delete(msg.bet_id);
      if (msg.code === "duplicate_bet_id" && p) {
        // Our resend of a bet the server had already taken: it stands.
        if (p.round_id === bets.round_id) bets.confirmed[p.spot] = (bets.confirmed[p.spot] || 0) + p.amount;
        bets.unsettled.set(p.bet_id, { ...p });
        break;
      }
      const what = p ? `${spotName(p.spot)} ${money(p.amount)}: ` : "";
      showError(what + (p && p.resent ? `${t("notice.resent_no")} ` : "") + rejectText(msg.code, msg.message, p));
      break;
    }
    case "bet_settled": {
      // After a welcome the server first sends what we missed (the replay's results, or
      // our latest results at this table): a bet we already saw settle is dropped, and
      // until a live table event arrives their balances are older than the welcome's.
      if (seenSettled.has(msg.bet_id)) break;
      seenSettled.add(msg.bet_id);
      const catchUp = catchUpHead !== null;
      const wasOpen = bets.unsettled.delete(msg.bet_id);
      markSeen(true);
      // an operator's session: the balance is the operator's (asked after the round)
      if (!catchUp && !(player && player.currency)) setBalance(msg.balance);
      if (msg.round_id === bets.round_id || msg.round_id === (st && st.round_id)) {
        bets.settled.push(msg);
      }
      if (resumeWindow) {
        if (!catchUp || wasOpen || resumeWindow.resumed) addToResumeSummary(msg);
      } else if (!catchUp) announce(settledSentence(msg));
      break;
    }
    case "reality_check":
      showRealityCheck(msg);
      break;
    case "balance":
      setBalance(msg.balance);
      break;
    case "presence":  // players online at the table (docs/protocol.md)
      online = typeof msg.online === "number" ? msg.online : null;
      break;
    case "bets":
      break;
    case "error":
      showError(errorText(msg.code, msg.message));
      break;
    default:
      break;
  }
  render();
}

function setBalance(b) {
  if (typeof b !== "number") return;
  if (!player) player = { id: "", name: "", balance: b };
  player.balance = b;
  rememberPlayer(player);
  balanceAt = serverNow();
  shareBalance();
}

/** Tell the player's other tabs: they show the same balance without waiting for a frame. */
function shareBalance() {
  if (!balanceChannel || !player || !player.id) return;
  balanceChannel.postMessage({ player: player.id, balance: player.balance, at: balanceAt });
}

function onOtherTabBalance(m) {
  // Newest wins: a tab's older news (a frame that crossed ours) changes nothing.
  if (!m || !player || m.player !== player.id || typeof m.balance !== "number" || m.at <= balanceAt) return;
  balanceAt = m.at;
  player.balance = m.balance;
  render();
}

function newRoundBets(roundId, { away = false } = {}) {
  closeDrafts({ away });  // a round that ended unseen (say, while reconnecting) still says so
  if (Object.keys(bets.confirmed).length) bets.last = { ...bets.confirmed };
  bets.round_id = roundId;
  bets.confirmed = {};
  bets.draft = {};
  bets.history = [];
  bets.settled = [];
  bets.unplaced = {};
  bets.autoTried = null;
  justRevealed = null;
  hideWin();
  // "While you were away" is about rounds gone by: its balance is stale once one opens.
  $("#resume-summary").hidden = true;
}

// When this browser last saw the table live: bets settled after it were settled while
// the player was away (even across a reload), and are summed up on arrival.
const SEEN_KEY = "livetable.lastSeen";
let seenWritten = 0;
function markSeen(force = false) {
  const now = Date.now();
  if (force !== true && now - seenWritten < 2000) return;
  seenWritten = now;
  // On the server's clock, like the Bet Record's settled_at.
  try { localStorage.setItem(SEEN_KEY, String(Math.round(serverNow()) + 500)); } catch { /* private mode */ }
}
function lastSeen() {
  try { return Number(localStorage.getItem(SEEN_KEY)) || 0; } catch { return 0; }
}

/** After a reload: this round's confirmed bets and the last round's (for rebet) from the Bet Record. */
async function restoreFromRecord() {
  if (!token) return;
  const since = lastSeen();
  try {
    const { bets: rows } = await getJSON("/api/bets?limit=50", { token });
    if (!rows || !st) return;
    const away = rows.filter((r) => since && r.settled_at && r.settled_at > since && r.state !== "accepted");
    if (away.length) {
      showResumeSummary(away.reverse().map((r) => ({ bet_id: r.bet_id, round_id: r.round_id,
        spot: r.spot, amount: r.amount, outcome: r.state === "refunded" ? "refund" : r.outcome,
        odds: r.odds, returned: r.returned, balance: r.balance_after, round_no: r.round_no })));
    }
    const mine = rows.filter((r) => r.table === tableId);
    const current = mine.filter((r) => r.round_id === st.round_id);
    if (current.length && !Object.keys(bets.confirmed).length) {
      for (const r of current) {
        bets.confirmed[r.spot] = (bets.confirmed[r.spot] || 0) + r.amount;
        if (r.state === "accepted") bets.unsettled.set(r.bet_id, r);
      }
    }
    const prev = mine.find((r) => r.round_id !== st.round_id);
    if (prev && !Object.keys(bets.last).length) {
      for (const r of mine.filter((x) => x.round_id === prev.round_id)) {
        bets.last[r.spot] = (bets.last[r.spot] || 0) + r.amount;
      }
    }
    render();
  } catch { /* the Bet Record is a convenience here */ }
}

// ---------------------------------------------------------------- resume summary

function openResumeWindow(resumed) {
  clearTimeout(resumeWindow && resumeWindow.timer);
  const settled = resumeWindow ? resumeWindow.settled : [];
  resumeWindow = { settled, resumed, timer: setTimeout(closeResumeWindow, RESUME_WINDOW_MS) };
}

function addToResumeSummary(msg) {
  if (!resumeWindow.settled.some((s) => s.bet_id === msg.bet_id)) resumeWindow.settled.push(msg);
  clearTimeout(resumeWindow.timer);
  resumeWindow.timer = setTimeout(closeResumeWindow, 800);
}

async function closeResumeWindow() {
  const w = resumeWindow;
  resumeWindow = null;
  if (!w) return;
  // Without a replay, bets we knew as open may have settled while we were away:
  // the Bet Record has them.
  if (bets.unsettled.size && token) {
    try {
      const { bets: rows } = await getJSON("/api/bets?limit=50", { token });
      for (const r of rows || []) {
        if (!bets.unsettled.has(r.bet_id) || r.state === "accepted") continue;
        bets.unsettled.delete(r.bet_id);
        w.settled.push({ bet_id: r.bet_id, round_id: r.round_id, spot: r.spot, amount: r.amount,
          outcome: r.state === "refunded" ? "refund" : r.outcome, odds: r.odds, returned: r.returned,
          balance: r.balance_after, round_no: r.round_no });
      }
    } catch { /* nothing more to add */ }
  }
  if (!w.settled.length) return;
  showResumeSummary(w.settled);
}

function showResumeSummary(list) {
  const box = $("#resume-summary");
  const ul = $("#resume-list");
  ul.replaceChildren(...list.map((s) => h("li", { "data-testid": "resume-item", "data-bet-id": s.bet_id },
    settledSentence(s))));
  const returned = list.reduce((a, s) => a + (s.returned || 0), 0);
  const balance = player ? player.balance : list[list.length - 1].balance;
  $("#resume-total").textContent = t("resume.total", { returned: money(returned), balance: money(balance) });
  box.hidden = false;
  announce(`${t("resume.title")} ${t("resume.total", { returned: money(returned), balance: money(balance) })}`);
}

// ---------------------------------------------------------------- betting

function bettingOpen() {
  return !!(st && st.phase === "betting" && st.closes_at && st.closes_at - serverNow() > 0);
}

function canBet() { return bettingOpen() && !!token && !!player && conn && conn.online; }

function sum(obj, f = (s, a) => a) { return Object.entries(obj).reduce((acc, [s, a]) => acc + f(s, a), 0); }
const deducted = (obj) => sum(obj, deductedFor);
function pendingOn(spot) {
  let a = 0;
  for (const p of bets.pending.values()) if (p.spot === spot && p.round_id === bets.round_id) a += p.amount;
  return a;
}
function pendingDeducted() {
  let a = 0;
  for (const p of bets.pending.values()) a += deductedFor(p.spot, p.amount);
  return a;
}
/** What the balance can still cover: the server's balance less bets sent but not yet answered. */
function available() { return player ? player.balance - pendingDeducted() : 0; }

/** Why `draft` cannot be sent, or null. */
function draftProblem(draft) {
  if (!st) return null;
  const lim = betLimits();
  const need = deducted(draft);
  if (need > available()) {
    return t("warn.balance", { need: money(need), have: money(available()) });
  }
  for (const [spot, amount] of Object.entries(draft)) {
    const total = amount + (bets.confirmed[spot] || 0) + pendingOn(spot);
    const max = isPairSpot(spot) ? lim.pair_max : lim.max;
    if (total > max) return t("warn.max", { spot: spotName(spot), max: money(max) });
  }
  const roundTotal = need + deducted(bets.confirmed) + pendingDeducted();
  if (lim.round_max && roundTotal > lim.round_max) {
    return t("warn.round_max", { max: money(lim.round_max) });
  }
  return null;
}

function setDraft(next, { announceIt = true } = {}) {
  const problem = draftProblem(next);
  if (problem) { warn(problem); return false; }
  bets.history.push({ ...bets.draft });
  bets.draft = next;
  if (announceIt) announce(t("announce.draft", { deducted: money(deducted(next)) }));
  render();
  return true;
}

function placeChip(spot) {
  if (!canBet()) { warn(whyNoBet()); return; }
  const next = { ...bets.draft, [spot]: (bets.draft[spot] || 0) + chip };
  if (setDraft(next, { announceIt: false })) {
    play("chip");
    announce(t("announce.placed", { spot: spotName(spot), amount: money(next[spot]),
      deducted: money(deducted(next)) }));
  }
}

function undo() {
  if (!bets.history.length) return;
  bets.draft = bets.history.pop();
  render();
}

function clearDraft() {
  if (!Object.keys(bets.draft).length) return;
  bets.history.push({ ...bets.draft });
  bets.draft = {};
  render();
}

function rebet() {
  if (!canBet()) { warn(whyNoBet()); return; }
  if (!Object.keys(bets.last).length) return;
  const next = { ...bets.draft };
  for (const [s, a] of Object.entries(bets.last)) next[s] = (next[s] || 0) + a;
  setDraft(next);
}

function double() {
  if (!canBet()) { warn(whyNoBet()); return; }
  if (!Object.keys(bets.draft).length) return;
  const next = {};
  for (const [s, a] of Object.entries(bets.draft)) next[s] = a * 2;
  setDraft(next);
}

function confirmBets({ auto = false } = {}) {
  if (!canBet()) { warn(whyNoBet()); return; }
  const entries = Object.entries(bets.draft).filter(([, a]) => a > 0);
  if (!entries.length) return;
  const problem = draftProblem(bets.draft);
  if (problem) { warn(problem); return; }
  const lim = betLimits();
  for (const [spot, amount] of entries) {
    const min = isPairSpot(spot) ? lim.pair_min : lim.min;
    if (amount < min) { warn(t("warn.min", { spot: spotName(spot), min: money(min) })); return; }
  }
  const slipId = newBetId();
  const ps = entries.map(([spot, amount]) => (
    { bet_id: newBetId(), slip_id: slipId, round_id: st.round_id, spot, amount }));
  for (const p of ps) bets.pending.set(p.bet_id, p);
  sendSlip(slipId, ps);
  bets.draft = {};
  bets.history = [];
  if (auto) notice(t("notice.auto_confirmed"));
  announce(t(auto ? "notice.auto_confirmed" : "announce.sent"));
  render();
}

/** The countdown ended on chips that were never confirmed: they were not placed. Say so,
 * and keep them on their spots, marked, until the next round. */
function closeDrafts({ away = false } = {}) {
  const entries = Object.entries(bets.draft).filter(([, a]) => a > 0);
  bets.draft = {};
  bets.history = [];
  if (!entries.length) return;
  for (const [spot, amount] of entries) bets.unplaced[spot] = (bets.unplaced[spot] || 0) + amount;
  const list = entries.map(([spot, amount]) => `${spotName(spot)} ${money(amount)}`).join(", ");
  // Auto-confirm would have sent them: only a connection down at the close kept it from it
  // (the close is learnt from a reconnect's replay or its snapshot), not the player.
  const missed = prefs.autoConfirm && (away || catchUpHead !== null || !(conn && conn.online));
  notice(t(missed ? "notice.not_placed_auto" : "notice.not_placed", { bets: list }), { kind: "warn" });
  render();
}

function whyNoBet() {
  if (!token || !player) return t("warn.viewer");
  if (!conn || !conn.online) return t("warn.offline");
  if (st && st.phase === "paused") return t("reject.paused");
  return t("warn.closed");
}

// Toasts at the top of the table: a warning (this chip, this spot, not now), an error (the
// server said no) and a notice (what became of bets). Each replaces its previous text.
function toast(id, text, ms, urgent) {
  const el = $(id);
  el.textContent = text;
  el.hidden = false;
  announce(text, { urgent });
  clearTimeout(el._timer);
  el._timer = setTimeout(() => { el.hidden = true; }, ms);
}

function warn(text) { toast("#bet-warning", text, 6000, true); }
function hideToast(id) { const el = $(id); clearTimeout(el._timer); el.hidden = true; }
function showError(text) { toast("#bet-error", text, 10000, true); }
function notice(text, { kind = "info" } = {}) {
  $("#bet-notice").dataset.kind = kind;
  toast("#bet-notice", text, 9000, kind !== "info");
}

// A reality check: the session's figures as the server counted them, and a button to go
// on (slips are refused until it is pressed).
function showRealityCheck(msg) {
  $("#reality-figures").textContent = t("reality.figures", {
    minutes: msg.minutes, staked: money(msg.staked), returned: money(msg.returned),
    net: money(msg.net),
  });
  const box = $("#reality-check");
  box.hidden = false;
  announce(`${t("reality.title")}. ${$("#reality-figures").textContent}`, { urgent: true });
  $("#reality-ack").focus();
}

// rg_limit: the server's detail is "(<limit>: <left> left of <max>)" in minor units
// (engine.bets.DETAILS); read here only to show the amounts in the session's currency.
const RG_DETAIL = /\((max_stake_per_round|loss_limit): (\d+) left of (\d+)\)/;

function rejectText(code, message, bet) {
  if (code === "rg_limit") {
    const m = RG_DETAIL.exec(message || "");
    if (m) return t(`reject.rg_limit.${m[1]}`, { left: money(Number(m[2])), max: money(Number(m[3])) });
  }
  const key = `reject.${code}`;
  const lim = betLimits();
  const pair = bet && isPairSpot(bet.spot);
  const text = t(key, {
    min: money(pair ? lim.pair_min : lim.min), max: money(pair ? lim.pair_max : lim.max),
    round_max: money(lim.round_max),
  });
  return text === key ? t("reject.unknown", { code, message: message || "" }) : text;
}

function errorText(code, message) {
  const key = `error.${code}`;
  const text = t(key);
  return text === key ? t("error.unknown", { code, message: message || "" }) : text;
}

// ---------------------------------------------------------------- keyboard

const KEY_SPOTS = { Digit1: "P1", Digit2: "P2", Digit3: "P3", Digit4: "P4", Digit5: "P5",
  Digit6: "P1_PAIR", Digit7: "P2_PAIR", Digit8: "P3_PAIR", Digit9: "P4_PAIR", Digit0: "P5_PAIR" };

function onKey(e) {
  const tag = (e.target && e.target.tagName) || "";
  if (["INPUT", "SELECT", "TEXTAREA"].includes(tag) || e.ctrlKey || e.metaKey || e.altKey) return;
  if (KEY_SPOTS[e.code]) { e.preventDefault(); placeChip(KEY_SPOTS[e.code]); return; }
  const k = e.key.toLowerCase();
  const chips = allowedChips();
  const i = chips.indexOf(chip);
  if (k === "[" || k === "-") { selectChip(chips[Math.max(0, i - 1)]); announce(t("chip.aria", { amount: money(chip) })); }
  else if (k === "]" || k === "=" || k === "+") { selectChip(chips[Math.min(chips.length - 1, i + 1)]); announce(t("chip.aria", { amount: money(chip) })); }
  else if (k === "u" || k === "backspace") undo();
  else if (k === "c") clearDraft();
  else if (k === "r") rebet();
  else if (k === "d") double();
  else if (k === "enter" && (e.shiftKey || e.target === document.body)) { e.preventDefault(); confirmBets(); }
  else if (e.target && e.target.closest && e.target.closest("#chips") && (k === "arrowright" || k === "arrowleft")) {
    const next = chips[Math.min(chips.length - 1, Math.max(0, i + (k === "arrowright" ? 1 : -1)))];
    selectChip(next);
    $(`#chips [data-value="${next}"]`).focus();
  }
}

// ---------------------------------------------------------------- rendering

function render() {
  if (!st) return;
  document.title = `${st.name} — ${t("app.name")}`;
  renderStatus();
  renderHands();
  renderSpots();
  renderControls();
  renderWallet();
  renderPayout();
  renderBanners();
  renderRoadmap($("#roadmap"), st.roadmap);
  const n = st.roadmap.length;
  $("#roadmap-count").textContent = t(n === 1 ? "roadmap.count_one" : "roadmap.count", { n });
  renderStats($("#stats"), st.roadmap);
  renderOnline();
  renderLimits();
  renderSound();
  renderConnection();
}

function renderOnline() {
  const el = $("#online");
  el.hidden = online === null;
  el.dataset.online = online === null ? "" : String(online);
  if (online !== null) el.textContent = t(online === 1 ? "online.count_one" : "online.count", { n: money(online) });
}

/** The limits of each kind of bet, on the felt. */
function renderLimits() {
  const lim = betLimits();
  const item = (id, key, params) => h("span", { "data-testid": id, text: t(key, params) });
  $("#limits").replaceChildren(
    h("span", { class: "limits__title", text: t("limits.title") }),
    item("limit-player", "limits.player", { min: money(lim.min), max: money(lim.max) }),
    item("limit-pair", "limits.pair", { min: money(lim.pair_min), max: money(lim.pair_max) }),
    item("limit-round", "limits.round", { max: money(lim.round_max) }));
}

function renderStatus() {
  $("#round-no").textContent = st.round_no ? t("table.round", { n: st.round_no }) : "";
  const phase = $("#phase");
  phase.textContent = t(`phase.${st.phase}`);
  phase.dataset.phase = st.phase;
  $("#mode").textContent = t(`mode.${st.mode || "auto"}`);
  tickCountdown();
}

function tickCountdown() {
  const el = $("#countdown");
  if (!el || !st) return;
  const bar = $("#countdown-bar");
  // Connection lost: the table's time is unknown, so the countdown stands still (and says
  // so) rather than run to a close that may have moved (a pause) or come and gone.
  const frozen = !!(conn && conn.everWelcomed && !conn.online);
  el.dataset.frozen = frozen ? "1" : "0";
  if (frozen) return;
  if (st.phase === "betting" && st.closes_at) {
    const ms = Math.max(0, st.closes_at - serverNow());
    el.dataset.remainingMs = String(Math.round(ms));
    const s = Math.ceil(ms / 1000);
    el.textContent = ms > 0 ? t("countdown.seconds", { s }) : t("countdown.closing");
    el.dataset.state = ms > 0 ? (s <= 5 ? "urgent" : "open") : "closed";
    // the last five seconds, one tick each (a longer tone for the last), when turned on
    if (ms > 0 && s <= 5 && el._ticked !== `${st.round_id}:${s}`) {
      el._ticked = `${st.round_id}:${s}`;
      play(s === 1 ? "last" : "tick");
    }
    if (!el._total || el._round !== st.round_id) { el._total = Math.max(ms, 1000); el._round = st.round_id; }
    bar.style.transform = `scaleX(${Math.min(1, ms / el._total)})`;
    bar.parentElement.hidden = false;
    const open = ms > 0;
    if (open && prefs.autoConfirm && ms <= AUTO_CONFIRM_MS) autoConfirm();
    if (open !== el._open) {
      el._open = open;
      if (!open) closeDrafts();
      renderControls();
    }
  } else {
    el.dataset.remainingMs = "0";
    el.dataset.state = "closed";
    el.textContent = "";
    bar.parentElement.hidden = true;
    if (el._open) { el._open = false; renderControls(); }
  }
}

function autoConfirm() {
  const sig = JSON.stringify(bets.draft);
  if (sig === "{}" || sig === bets.autoTried || !canBet()) return;
  bets.autoTried = sig;  // once per draft: a draft the balance cannot cover warns once
  confirmBets({ auto: true });
}

function renderHands() {
  const resultOf = Object.fromEntries((st.results || []).map((r) => [r.hand, r]));
  for (const hand of ["BANKER", ...POSITIONS]) {
    const box = $(`#hand-${hand}`);
    box.querySelector(".hand__title").textContent = spotName(hand);
    const cards = box.querySelector(".hand__cards");
    const value = box.querySelector(".hand__value");
    const view = st.hands[hand];
    const small = hand !== "BANKER";
    if (view) {
      const sig = view.cards.join(" ");
      if (cards.dataset.sig !== sig) {
        cards.replaceChildren(...view.cards.map((c) => cardEl(c, { small })));
        cards.dataset.sig = sig;
        if (justRevealed === hand) box.classList.add("hand--flip");
        setTimeout(() => box.classList.remove("hand--flip"), 600);
      }
      value.replaceChildren(
        h("span", { class: "hand__label", text: handLabel(view.value) }),
        view.flush ? h("span", { class: "tag tag--flush", text: t("tag.flush") }) : "",
        view.pair ? h("span", { class: "tag tag--pair", text: t("tag.pair") }) : "");
      value.dataset.value = view.value;
      box.dataset.revealed = "1";
    } else {
      const n = st.dealt[hand] || 0;
      const sig = `down:${n}`;
      if (cards.dataset.sig !== sig) {
        cards.replaceChildren(...Array.from({ length: n }, () => cardBackEl({ small })));
        cards.dataset.sig = sig;
      }
      value.replaceChildren();
      value.dataset.value = "";
      box.dataset.revealed = "0";
    }
    box.dataset.dealt = String(view ? view.cards.length : st.dealt[hand] || 0);
    if (hand === "BANKER") continue;
    const res = $(`#result-${hand}`);
    const r = resultOf[hand];
    if (r) {
      const oddsApply = r.odds > 1 && r.outcome !== "tie";  // the higher odds: say them
      res.textContent = t(`result.${r.outcome}`) + (oddsApply ? ` ${r.odds}:1` : "");
      res.dataset.outcome = r.outcome;
      res.dataset.odds = String(r.odds);
      res.className = `result result--${r.outcome}`;
      box.dataset.outcome = r.outcome;
    } else {
      res.textContent = "";
      res.dataset.outcome = "";
      res.className = "result";
      delete box.dataset.outcome;
    }
  }
}

function renderSpots() {
  const resultOf = Object.fromEntries((st.results || []).map((r) => [r.hand, r]));
  const open = canBet();
  for (const spot of SPOTS) {
    const b = $(`#spot-${spot}`);
    const n = spot.slice(1, 2);
    const pair = isPairSpot(spot);
    b.querySelector(".spot__name").textContent = spotName(spot);
    b.querySelector(".spot__odds").textContent = spotOdds(spot);
    const confirmed = bets.confirmed[spot] || 0;
    const pend = pendingOn(spot);
    const draft = bets.draft[spot] || 0;
    const unplaced = bets.unplaced[spot] || 0;
    const stake = b.querySelector(".spot__stake");
    // Four looks: confirmed (gold), sent and unanswered (pending: striped, "sending"),
    // draft (white, "+"), and chips the countdown ended on (struck through, "not placed").
    // Drawn again only when they change: a chip just put down drops onto the spot once.
    const sig = [confirmed, pend, draft, unplaced, lang()].join("|");
    if (stake.dataset.sig !== sig) {
      const dropped = draft > Number(stake.dataset.draft || 0) ? " stake--new" : "";
      stake.dataset.sig = sig;
      stake.replaceChildren();
      if (confirmed) stake.append(h("span", { class: "stake stake--confirmed", text: money(confirmed) }));
      if (pend) {
        stake.append(h("span", { class: "stake stake--pending", title: t("spot.pending"),
          text: (confirmed ? "+" : "") + money(pend) }));
      }
      if (draft) stake.append(h("span", { class: `stake stake--draft${dropped}`, text: (confirmed + pend ? "+" : "") + money(draft) }));
      if (unplaced) {
        stake.append(h("span", { class: "stake stake--unplaced", "data-testid": `unplaced-${spot}`,
          text: `${money(unplaced)} ${t("spot.not_placed")}` }));
      }
    }
    stake.dataset.confirmed = String(confirmed);
    stake.dataset.pending = String(pend);
    stake.dataset.draft = String(draft);
    stake.dataset.unplaced = String(unplaced);
    stake.dataset.total = String(confirmed + pend + draft);
    b.classList.toggle("spot--has-bet", confirmed + pend + draft > 0);
    b.classList.toggle("spot--pending", pend > 0);
    b.setAttribute("aria-disabled", open ? "false" : "true");
    const parts = [spotName(spot), pair ? t("spot.aria_pair", { odds: rulesPayouts()?.pair_odds ?? "" })
      : t("spot.aria_player", { multiple: deductedFor(spot, 1) })];
    if (confirmed) parts.push(t("spot.aria_confirmed", { amount: money(confirmed) }));
    if (pend) parts.push(t("spot.aria_pending", { amount: money(pend) }));
    if (draft) parts.push(t("spot.aria_draft", { amount: money(draft) }));
    if (unplaced) parts.push(t("spot.aria_unplaced", { amount: money(unplaced) }));
    parts.push(t("spot.aria_key", { key: pair ? String((Number(n) + 5) % 10) : n }));
    b.setAttribute("aria-label", parts.join(". "));
    // A settled Pair spot shows whether the pair came.
    const r = resultOf[`P${n}`];
    b.classList.toggle("spot--won", !!(r && (pair ? r.pair : r.outcome === "win")));
  }
}

function renderControls() {
  if (!st) return;
  const open = canBet();
  const hasDraft = Object.keys(bets.draft).length > 0;
  $("#btn-undo").disabled = !bets.history.length;
  $("#btn-clear").disabled = !hasDraft;
  $("#btn-rebet").disabled = !open || !Object.keys(bets.last).length;
  $("#btn-double").disabled = !open || !hasDraft;
  $("#btn-confirm").disabled = !open || !hasDraft;
  $("#betbar").dataset.open = open ? "1" : "0";
  const need = deducted(bets.draft);
  const stake = sum(bets.draft);
  const summary = $("#bet-summary");
  summary.dataset.stake = String(stake);
  summary.dataset.deducted = String(need);
  if (!hasDraft) {
    summary.textContent = open ? t("bet.hint", { multiple: deductedFor("P1", 1) }) : whyNoBetSoft();
  } else {
    const playerPart = sum(bets.draft, (s, a) => (isPairSpot(s) ? 0 : a));
    const pairPart = stake - playerPart;
    const parts = [];
    if (playerPart) parts.push(t("bet.player_part", { stake: money(playerPart), deducted: money(deductedFor("P1", playerPart)) }));
    if (pairPart) parts.push(t("bet.pair_part", { stake: money(pairPart) }));
    summary.textContent = `${t("bet.deducts", { deducted: money(need) })} (${parts.join(" + ")}) · ` +
      t("bet.after", { balance: money(available() - need) });
  }
  const over = hasDraft && need > available();
  $("#balance-warning").hidden = !over;
  if (over) $("#balance-warning").textContent = t("warn.balance", { need: money(need), have: money(available()) });
  renderChips();
}

function whyNoBetSoft() {
  if (!token || !player) return t("warn.viewer");
  if (conn && !conn.online) return t("warn.offline");
  if (st.phase === "betting") return t("countdown.closing");
  // paused while taking bets: they are taken again in this round, not the next
  if (st.phase === "paused" && st.resume_phase === "betting") return t("bet.paused_resumes");
  return t("bet.wait");
}

function renderWallet() {
  const el = $("#balance");
  if (!player) { el.textContent = "—"; el.dataset.value = ""; return; }
  el.textContent = withCurrency(money(player.balance), player);
  el.dataset.value = String(player.balance);
  $("#player-name").textContent = player.name || "";
  const amount = inPlay();
  $("#in-play").textContent = amount ? t("wallet.in_play", { amount: money(amount) }) : "";
  $("#in-play").dataset.value = String(amount);
  // A demo guest who can no longer afford the smallest bet may start again.
  const lim = betLimits();
  const smallest = Math.min(deductedFor("P1_PAIR", lim.pair_min ?? lim.min), deductedFor("P1", lim.min));
  $("#guest-reset").hidden = !(token && storedGuest() && player.balance < smallest && !amount
    && !Object.keys(bets.draft).length);
}

/** What the balance has given to bets not settled yet: bets sent and unanswered, and the
 * bets accepted for the round in play. Once the table says the round settled or was
 * cancelled, its bets are no longer in play, whether or not their results have come. */
function inPlay() {
  let a = pendingDeducted();
  const over = !st || st.phase === "settled" || st.phase === "cancelled";
  for (const b of bets.unsettled.values()) {
    if (over || b.round_id !== st.round_id) continue;
    a += typeof b.deducted === "number" ? b.deducted : deductedFor(b.spot, b.amount);
  }
  return a;
}

function renderPayout() {
  const box = $("#payout");
  const list = bets.settled.filter((s) => s.round_id === bets.round_id || s.round_id === st.round_id);
  if (!list.length) { box.hidden = true; box.dataset.returned = ""; box.dataset.net = ""; return; }
  const returned = list.reduce((a, s) => a + s.returned, 0);
  const ded = list.reduce((a, s) => a + deductedFor(s.spot, s.amount), 0);
  const net = returned - ded;
  box.hidden = false;
  box.dataset.returned = String(returned);
  box.dataset.net = String(net);
  $("#payout-list").replaceChildren(...list.map((s) => h("li", {
    "data-testid": "payout-item", "data-spot": s.spot, "data-returned": String(s.returned),
  }, settledSentence(s))));
  const total = $("#payout-total");
  total.textContent = t("payout.total", { returned: money(returned), net: signed(net) });
  total.className = `payout__total ${net > 0 ? "pos" : net < 0 ? "neg" : ""}`;
  // The round's results come one frame per bet: show the sum once they have all come.
  clearTimeout(winDue);
  winDue = setTimeout(() => showWin(list, returned, net), WIN_SETTLE_MS);
}

// "You win 1,200" on the felt, where the player is looking (the payout panel is below the
// fold on a laptop), with a chime when the sound is on. Shown once per round, for a while.
function showWin(list, returned, net) {
  const round = list[0].round_id;
  const first = winShown !== round;
  winShown = round;
  const el = $("#win");
  if (!first && el.dataset.returned === String(returned)) return;
  el.dataset.returned = String(returned);
  el.dataset.net = String(net);
  el.dataset.kind = net > 0 ? "win" : "other";
  el.replaceChildren(net > 0
    ? h("strong", { class: "win__amount", text: t("win.you_win", { amount: money(returned) }) })
    : h("span", { text: t("win.returned", { amount: money(returned), net: signed(net) }) }));
  el.hidden = false;
  if (net > 0 && winChimed !== round) {
    winChimed = round;
    announce(t("win.you_win", { amount: money(returned) }));
    if (prefs.sound && !resumeWindow) chime();  // no fanfare for results caught up on
  }
  clearTimeout(winTimer);
  winTimer = setTimeout(() => { el.hidden = true; }, WIN_SHOWN_MS);
}

function hideWin() {
  clearTimeout(winTimer);
  clearTimeout(winDue);
  const el = $("#win");
  if (el) el.hidden = true;
}

// ---------------------------------------------------------------- sound

function renderSound() {
  const b = $("#sound");
  b.setAttribute("aria-pressed", prefs.sound ? "true" : "false");
  b.textContent = prefs.sound ? `♪ ${t("sound.on")}` : `♪̸ ${t("sound.off")}`;
  b.title = t("sound.label");
}

function toggleSound() {
  prefs.sound = !prefs.sound;
  writePref(PREF_SOUND, prefs.sound ? "on" : "off");
  if (prefs.sound) unlockAudio();
  renderSound();
}

/** Browsers let a page make sound only after a gesture: the click that turns it on. */
function unlockAudio() {
  audio = audioContext();  // the page's one AudioContext (atmosphere.js)
}

/** A short rising arpeggio made on the spot (no sound file to download). */
function chime() {
  document.body.dataset.soundsPlayed = String(Number(document.body.dataset.soundsPlayed || 0) + 1);
  unlockAudio();
  if (!audio) return;
  const start = audio.currentTime + 0.02;
  [523.25, 659.25, 783.99, 1046.5].forEach((freq, i) => {
    const osc = audio.createOscillator();
    const gain = audio.createGain();
    const t0 = start + i * 0.09;
    osc.type = "triangle";
    osc.frequency.value = freq;
    gain.gain.setValueAtTime(0.0001, t0);
    gain.gain.exponentialRampToValueAtTime(0.2, t0 + 0.02);
    gain.gain.exponentialRampToValueAtTime(0.0001, t0 + 0.5);
    osc.connect(gain).connect(audio.destination);
    osc.start(t0);
    osc.stop(t0 + 0.55);
  });
}

// ---------------------------------------------------------------- connection

/** The overlay on the felt while the connection is down, and what became of the bets. */
function renderConnection() {
  const overlay = $("#conn-overlay");
  // fatal: not reconnecting at all (an ended session), which the page says elsewhere
  const down = !!(conn && conn.everWelcomed && !conn.online && conn.state !== "fatal");
  overlay.hidden = !down;
  if (!down) return;
  const offline = conn.state === "offline";
  $("#conn-overlay-title").textContent = t(offline ? "overlay.offline" : "overlay.reconnecting");
  $("#conn-overlay-detail").textContent = t("overlay.frozen");
  const items = [];
  for (const p of bets.pending.values()) {
    items.push(["pending", t("overlay.pending", { spot: spotName(p.spot), amount: money(p.amount) })]);
  }
  const confirmed = inPlay() - pendingDeducted();
  if (confirmed) items.push(["confirmed", t("overlay.confirmed", { amount: money(confirmed) })]);
  const draft = deducted(bets.draft);
  if (draft) items.push(["draft", t("overlay.draft", { amount: money(sum(bets.draft)) })]);
  if (!items.length) items.push(["none", t("overlay.none")]);
  $("#conn-overlay-bets").replaceChildren(...items.map(([state, text]) =>
    h("li", { "data-testid": "inflight-item", "data-state": state, text })));
}

// ---------------------------------------------------------------- demo guest

async function resetGuest() {
  const button = $("#guest-reset");
  button.disabled = true;
  forgetGuest();
  try {
    const g = await ensureGuest();
    if (!g) throw new Error("no guest");
    token = g.token;
    player = g.player || null;
    balanceAt = serverNow();
    bets.last = {};
    bets.unsettled.clear();
    bets.confirmed = {};
    bets.settled = [];
    conn.setTable(tableId);  // reconnect as the new guest
    notice(t("wallet.reset_done", { balance: money(player ? player.balance : 0) }));
  } catch {
    showError(t("wallet.reset_failed"));
  } finally {
    button.disabled = false;
    render();
  }
}

function renderBanners() {
  const paused = $("#banner-paused");
  paused.hidden = st.phase !== "paused";
  if (!paused.hidden) paused.textContent = t("banner.paused", { reason: st.paused_reason || "—" });
  const cancelled = $("#banner-cancelled");
  cancelled.hidden = st.phase !== "cancelled";
  if (!cancelled.hidden) cancelled.textContent = t("banner.cancelled", { reason: st.cancel_reason || "—" });
  const last = $("#banner-last");
  last.hidden = !(st.last_round || st.cut_card_out) || st.phase === "idle";
  if (!last.hidden) last.textContent = t("banner.last_round");
  const shoe = $("#banner-shoe");
  // "next round opens once the opening card is out": true until the shoe's first round
  // opens (round_no 0 between shoe_started and round_opened), never while one is open
  shoe.hidden = !(st.shuffling || (Date.now() < newShoeUntil && !st.round_no));
  if (!shoe.hidden) shoe.textContent = t("banner.new_shoe");
  const viewer = $("#banner-viewer");
  viewer.hidden = !!(token && player);
  if (!viewer.hidden) viewer.textContent = t("warn.viewer");
}

// ---------------------------------------------------------------- sentences

function resultsSentence(results) {
  return (results || []).map((r) => `${spotName(r.hand)}: ${t(`result.${r.outcome}`)}${r.odds > 1 && r.outcome !== "tie" ? ` ${r.odds}:1` : ""}`).join("; ");
}

function settledSentence(s) {
  const ded = deductedFor(s.spot, s.amount);
  const net = (s.returned || 0) - ded;
  // Odds say how a result was paid: none for a tie or a refund, and none for a Pair bet that
  // lost (it is simply lost; "Lose 1:1" would be a Player bet's reading).
  const pairLost = isPairSpot(s.spot) && s.outcome !== "win";
  const odds = s.outcome === "refund" || s.outcome === "tie" || pairLost ? "" : ` ${s.odds}:1`;
  const round = s.round_no ? `${t("table.round", { n: s.round_no })} · ` : "";
  return `${round}${spotName(s.spot)} ${money(s.amount)} — ${t(`outcome.${s.outcome}`)}${odds} · ` +
    `${t("payout.returned", { amount: money(s.returned) })} · ${t("payout.net", { amount: signed(net) })}`;
}

main();
