// The dealer console: drives one table over /ws/dealer.
//
// Every command is answered by `ack {cmd, detail}` or `error {code, message}`, in order,
// so the console keeps a queue of what it sent and pairs each answer with its command.
// Cards are typed the way a scanner types them ("KH", "10D", then Enter) and checked here
// with the server's own lenient grammar before they are sent; the ack says where the card
// went (a position and its 1st/2nd card, or the burn). The round is dealt face down while
// betting is open (the rules sheet's order); the reveals wait for the close.
//
// After a reload the console asks the server for the cards entered so far this round
// (`round_cards`: answered to dealer consoles only, in manual mode). A mis-scan is voided
// with `correct_cards`, which needs a supervisor's approval: a one-time code a supervisor's
// console gets with `approve_correction` (this table, this round, this count; 120 s).
// Hotkeys: Alt+O open, Alt+C close, Alt+R reveal, Alt+P pause/resume (by key position, so
// they work with a Thai or Hindi keyboard layout too).
//
// Below the card entry: who deals (`dealer_sign_in`, shown at the table), the table chat
// (chat.js), where each player's line can be muted or deleted, and the players' tips to the
// dealer with the shift's total (dealertips.js).
//
// Beside this module: dealercard.js (a typed card checked before it is sent) and
// dealerlog.js (the console's words for commands, slots and events, and its log).

import { t, onLangChange } from "./i18n.js";
import { $, h, tName, money, spotName, handLabel, announce, initPage, bindConnection } from "./common.js";
import { Connection } from "./conn.js";
import { serverNow } from "./clock.js";
import { fromSnapshot, applyEvent, HANDS } from "./state.js";
import { cardEl, cardBackEl } from "./cards.js";
import { getJSON } from "./api.js";
import { mountChat } from "./chat.js";
import { mountDealerTips } from "./dealertips.js";
import { isCut, validateCard } from "./dealercard.js";
import { cmdName, slotName, describe, log } from "./dealerlog.js";

const TOKEN_KEY = "livetable.dealerToken";
const TABLE_KEY = "livetable.dealerTable";

let conn = null;
let st = null;
let sent = [];                 // commands awaiting their ack/error, in order
let entered = [];              // [{slot, n?, card}] the cards of this round, in dealing order
let lastScanned = null;        // the last card sent this round: a repeat is worth a warning
let lastPlaced = null;
let cancelArmed = null;

function token() { return sessionStorage.getItem(TOKEN_KEY); }

/** Who the token says this is — for display only: the server checks the signature. */
function whoAmI() {
  try {
    const part = (token() || "").split(".")[0].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(new TextDecoder().decode(
      Uint8Array.from(atob(part + "=".repeat((4 - part.length % 4) % 4)), (c) => c.charCodeAt(0))));
    return { kind: claims.k, name: claims.name, tables: claims.tables || [] };
  } catch { return null; }
}

const HOTKEYS = { KeyO: "#open", KeyC: "#close", KeyR: "#reveal", KeyP: "pause" };

function onHotkey(e) {
  if (!e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || $("#console").hidden) return;
  let target = HOTKEYS[e.code];
  if (!target) return;
  e.preventDefault();
  if (target === "pause") target = st && st.phase === "paused" ? "#resume" : "#pause";
  const button = $(target);
  if (button.disabled) {
    announce(t("dealer.key_not_now", { what: button.textContent.replace(/\s*Alt\+\w$/, "").trim() }), { urgent: true });
    return;
  }
  button.click();
}

/** The cards entered this round, by slot (burn, P1 … BANKER). */
function typedBySlot() {
  const out = {};
  for (const e of entered) (out[e.slot] = out[e.slot] || []).push(e.card);
  return out;
}

async function main() {
  initPage({ active: "dealer", connection: true });
  onLangChange(render);
  $("#login").addEventListener("submit", (e) => {
    e.preventDefault();
    const v = $("#token").value.trim();
    if (!v) return;
    sessionStorage.setItem(TOKEN_KEY, v);
    $("#token").value = "";
    start();
  });
  $("#logout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    if (conn) conn.stop();
    conn = null;
    showLogin();
  });
  $("#table").addEventListener("change", () => {
    sessionStorage.setItem(TABLE_KEY, $("#table").value);
    st = null; entered = []; lastScanned = null; sent = [];
    conn.setTable($("#table").value);
  });
  $("#mode").addEventListener("change", () => {
    // not sent (the console is offline): the box goes back to the mode the table is in
    if (!command({ type: "set_mode", auto: $("#mode").checked })) $("#mode").checked = !$("#mode").checked;
  });
  $("#start-shoe").addEventListener("click", () => command({ type: "start_shoe" }));
  // The betting time is the dealer's choice for this console: kept across a reload.
  const seconds = $("#betting-seconds");
  const kept = readBettingSeconds();
  if (kept) seconds.value = String(kept);
  seconds.addEventListener("change", () => {
    try { localStorage.setItem(BETTING_KEY, String(Math.round(Number(seconds.value)))); } catch { /* private mode */ }
  });
  $("#open").addEventListener("click", () => {
    const s = Math.max(1, Math.round(Number($("#betting-seconds").value) || 15));
    command({ type: "open_betting", betting_ms: s * 1000 });
  });
  $("#close").addEventListener("click", () => command({ type: "close_betting" }));
  $("#reveal").addEventListener("click", () => command({ type: "reveal" }));
  $("#pause").addEventListener("click", () => command({ type: "pause", reason: $("#reason").value.trim() }));
  $("#resume").addEventListener("click", () => command({ type: "resume" }));
  $("#cancel").addEventListener("click", armCancel);
  $("#cancel-confirm").addEventListener("click", () => {
    disarmCancel();
    command({ type: "cancel_round", reason: $("#reason").value.trim() });
  });
  $("#card-form").addEventListener("submit", (e) => { e.preventDefault(); sendCard(); });
  $("#correction-form").addEventListener("submit", (e) => { e.preventDefault(); sendCorrection(); });
  $("#approve").addEventListener("click", () => {
    const count = Math.max(1, Math.min(13, Math.round(Number($("#correction-count").value) || 1)));
    command({ type: "approve_correction", count });
  });
  $("#presenter-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("#presenter-name").value.trim();
    if (name) command({ type: "dealer_sign_in", name });
  });
  document.addEventListener("keydown", onHotkey);
  $("#card").addEventListener("input", () => validateCard(false));
  setInterval(tick, 250);

  if (token()) start(); else showLogin();
}

function showLogin(errorText) {
  $("#login").hidden = false;
  $("#console").hidden = true;
  const err = $("#login-error");
  err.hidden = !errorText;
  err.textContent = errorText || "";
  $("#token").focus();
}

async function start() {
  $("#login").hidden = true;
  $("#console").hidden = false;
  let tables = [];
  try { tables = (await getJSON("/api/tables")).tables || []; } catch { /* typed id below */ }
  const select = $("#table");
  select.replaceChildren(...tables.map((x) => h("option", { value: x.id, text: `${x.name || x.id} (${x.id})` })));
  const wanted = sessionStorage.getItem(TABLE_KEY);
  if (wanted && tables.some((x) => x.id === wanted)) select.value = wanted;
  const table = select.value || "t1";
  if (conn) conn.stop();
  conn = new Connection({ path: "/ws/dealer", table, token, resume: false });
  bindConnection(conn);
  // The chat: a dealer's own line is answered chat_accepted/chat_rejected (not an ack, so
  // it stays out of the command queue); mute and delete are commands like the others.
  mountChat(conn, $("#chat"), { presenter: $("#presenter-now"), moderate: {
    send: (client_msg_id, text) => conn.send({ type: "chat_send", client_msg_id, text }),
    mute: (player_id, minutes) => command({ type: "chat_mute", player_id, minutes }),
    remove: (id) => command({ type: "chat_delete", id }),
  } });
  mountDealerTips(conn, $("#tips"));  // tips to the dealer, and the shift's total
  conn.addEventListener("welcome", (e) => {
    st = fromSnapshot(e.detail.msg.table);
    sent = [];
    entered = [];
    lastScanned = null;
    log("info", t("dealer.log_welcome", { table: st.name }));
    askEnteredCards();  // after a reload: every card entered so far this round
    render();
    $("#card").focus();
  });
  conn.addEventListener("event", (e) => onEvent(e.detail));
  conn.addEventListener("message", (e) => onMessage(e.detail));
  conn.addEventListener("fatal", (e) => {
    sessionStorage.removeItem(TOKEN_KEY);
    conn.stop();
    showLogin(t("dealer.login_failed", { code: e.detail.code, message: e.detail.message || "" }));
  });
  conn.addEventListener("closed", (e) => {
    // A dealer hello with a bad token may simply be closed with a policy code.
    if ([1008, 4001, 4003].includes(e.detail.code) && !st) {
      sessionStorage.removeItem(TOKEN_KEY);
      conn.stop();
      showLogin(t("dealer.login_failed", { code: e.detail.code, message: e.detail.reason || "" }));
    }
  });
  conn.start();
}

/** Manual mode, a round in play: ask which cards were entered (dealer consoles only). */
function askEnteredCards() {
  if (st && st.mode === "manual" && st.round_id && !["idle", "settled", "cancelled"].includes(st.phase)) {
    command({ type: "round_cards" });
  }
}

const BETTING_KEY = "livetable.dealer.bettingSeconds";
function readBettingSeconds() {
  let v = 0;
  try { v = Number(localStorage.getItem(BETTING_KEY)); } catch { /* private mode */ }
  return Number.isFinite(v) && v >= 3 && v <= 120 ? v : 0;
}

/** The answer to a command, next to the controls that sent it: the correction's in its
 * own panel, every other one under the round's buttons (the log keeps them all). */
function feedback(cmdType, kind, text) {
  if (cmdType === "card" || cmdType === "round_cards" || cmdType === "ping") return;
  const el = $(cmdType === "correct_cards" ? "#correction-feedback" : "#round-feedback");
  el.textContent = text;
  el.dataset.kind = kind;
  el.hidden = false;
  clearTimeout(el._timer);
  el._timer = setTimeout(() => { el.hidden = true; }, kind === "error" ? 20_000 : 8_000);
}

function sendCorrection() {
  const count = Math.max(1, Math.min(13, Math.round(Number($("#correction-count").value) || 1)));
  const frame = { type: "correct_cards", count };
  const approval = $("#approval").value.trim();
  if (approval) frame.approval = approval;
  $("#approval").value = "";  // an approval is used once here, never kept
  command(frame);
}

function command(frame) {
  if (!conn || !conn.send(frame)) {
    log("error", t("dealer.not_connected"));
    announce(t("dealer.not_connected"), { urgent: true });
    return false;
  }
  sent.push(frame);
  let what = cmdName(frame.type);
  if (frame.card) what += ` ${frame.card}`;
  if (frame.betting_ms) what += ` ${t("countdown.seconds", { s: frame.betting_ms / 1000 })}`;
  if (frame.reason) what += ` “${frame.reason}”`;
  if (frame.type === "set_mode") what += `: ${t(frame.auto ? "mode.auto" : "mode.manual")}`;
  if (frame.type === "correct_cards") what += ` ${frame.count}${frame.approval ? ` (${t("dealer.approved")})` : ""}`;
  if (frame.type === "dealer_sign_in") what += `: ${frame.name}`;
  if (frame.type === "chat_mute") what += ` ${frame.player_id} · ${frame.minutes} min`;
  log("cmd", `→ ${what}`);
  return true;
}

function armCancel() {
  $("#cancel").hidden = true;
  $("#cancel-confirm").hidden = false;
  $("#cancel-confirm").focus();
  clearTimeout(cancelArmed);
  cancelArmed = setTimeout(disarmCancel, 5000);
}

function disarmCancel() {
  clearTimeout(cancelArmed);
  $("#cancel").hidden = false;
  $("#cancel-confirm").hidden = true;
}

// ---------------------------------------------------------------- cards

function sendCard() {
  const input = $("#card");
  const card = validateCard(true);
  if (!card) {
    const v = input.value.trim();
    if (v) {
      input.setAttribute("aria-invalid", "true");
      $("#card-error").hidden = false;
      $("#card-error").textContent = t("dealer.card_invalid", { card: v });
      announce(t("dealer.card_invalid", { card: v }), { urgent: true });
    }
    input.select();
    return;
  }
  const repeat = lastScanned !== null && card.text === lastScanned && !isCut(card.text);
  const warning = $("#card-warning");
  warning.hidden = !repeat;
  if (repeat) {
    warning.textContent = t("dealer.twice", { card: card.text });
    announce(warning.textContent, { urgent: true });
    log("error", `⚠ ${warning.textContent}`);
  }
  if (command({ type: "card", card: card.text })) {
    input.value = "";
    if (card.text !== "CUT") lastScanned = card.text;
  }
  input.focus();
}

// ---------------------------------------------------------------- frames

function onMessage(msg) {
  if (msg.type === "ack") {
    onAck(msg);
    return;
  }
  if (msg.type === "error") {
    const cmd = sent.shift();
    const known = t(`dealer.err.${msg.code}`);
    const text = t("dealer.error", { cmd: cmd ? cmdName(cmd.type) : "?", code: msg.code,
      // the console's own words when it has them: the server's English saying the same
      // again in brackets read as the refusal repeating itself
      message: known === `dealer.err.${msg.code}` ? msg.message || "" : known });
    log("error", `✗ ${text}`);
    if (cmd) feedback(cmd.type, "error", `✗ ${text}`);
    announce(text, { urgent: true });
    if (cmd && cmd.type === "card") {
      $("#card-error").hidden = false;
      $("#card-error").textContent = text;
    }
    if (cmd && cmd.type === "set_mode") render();
  }
}

/** An ack: paired with the oldest command of its kind sent, and said where it belongs. */
function onAck(msg) {
  const i = sent.findIndex((c) => c.type === msg.cmd);
  const cmd = i >= 0 ? sent.splice(i, 1)[0] : null;
  const d = msg.detail || {};
  if (msg.cmd === "round_cards") {
    entered = (d.cards || []).map((c) => ({ slot: c.slot, n: c.n, card: c.card }));
    const last = entered[entered.length - 1];
    lastScanned = last ? last.card : null;
    lastPlaced = last ? { card: last.card, slot: last.slot, n: last.n } : null;
    log("ack", `✓ ${t("dealer.entered_count", { n: entered.length })}`);
  } else if (msg.cmd === "approve_correction") {
    // A one-time code for this round and count, shown for the dealer's console (never kept).
    $("#approval-code").value = d.approval || "";
    log("ack", `✓ ${t("dealer.approval_issued", { n: d.count, round: d.round_id })}`);
    announce(t("dealer.approval_issued", { n: d.count, round: d.round_id }));
  } else if (msg.cmd === "correct_cards") {
    const voided = (d.voided || []).map((v) => `${v.card} (${slotName(v.slot)}${v.n ? ` · ${t("dealer.card_n", { n: v.n })}` : ""})`);
    log("ack", `✓ ${t("dealer.voided", { cards: voided.join(", ") })}`);
    feedback("correct_cards", "ack", `✓ ${t("dealer.voided", { cards: voided.join(", ") })}`);
    announce(t("dealer.voided", { cards: voided.join(", ") }));
    $("#card-warning").hidden = true;
    askEnteredCards();
  } else if (msg.cmd === "card") {
    const card = (cmd && cmd.card) || d.card || "";
    const slot = d.slot || d.to || "?";
    if (!["cut", "opening"].includes(slot)) entered.push({ slot, n: d.n, card });
    lastPlaced = { card, slot, n: d.n };
    let where = slotName(slot) + (d.n ? ` · ${t("dealer.card_n", { n: d.n })}` : "");
    if (slot === "opening" && typeof d.burned === "number") where += ` · ${t("dealer.burned", { n: d.burned })}`;
    log("ack", `✓ ${card} → ${where}`);
    announce(`${card} → ${where}`);
  } else if (d.awaiting) {
    log("ack", `✓ ${cmdName(msg.cmd)} — ${t("dealer.awaiting_opening")}`);
    feedback(msg.cmd, "ack", `✓ ${cmdName(msg.cmd)} — ${t("dealer.awaiting_opening")}`);
    announce(t("dealer.awaiting_opening"));
    $("#placed").dataset.awaiting = "1";
  } else {
    const extra = d.mode ? `: ${t(`mode.${d.mode}`)}` : Object.keys(d).length ? ` — ${Object.entries(d).map(([k, v]) => `${k} ${Array.isArray(v) ? v.join(" ") : v}`).join(", ")}` : "";
    log("ack", `✓ ${cmdName(msg.cmd)}${extra}`);
    feedback(msg.cmd, "ack", `✓ ${cmdName(msg.cmd)}${extra}`);
  }
  if (msg.cmd === "set_mode" && st && cmd) st.mode = cmd.auto ? "auto" : "manual";  // mode_changed says so too
  render();
}

function onEvent(ev) {
  if (!st) return;
  applyEvent(st, ev);
  switch (ev.type) {
    case "round_opened": entered = []; lastPlaced = null; lastScanned = null; $("#card-warning").hidden = true; break;
    case "shoe_started": entered = []; break;
    case "cards_voided": if (!sent.some((c) => c.type === "correct_cards")) askEnteredCards(); break;
    default: break;
  }
  log("event", describe(ev));
  render();
}

// ---------------------------------------------------------------- rendering

function nextReveal() {
  if (!st) return null;
  return HANDS.find((x) => !st.hands[x]) || null;
}

function render() {
  if (!st) return;
  const phase = $("#d-phase");
  phase.textContent = t(`phase.${st.phase}`);
  phase.dataset.phase = st.phase;
  $("#d-mode").textContent = t(`mode.${st.mode || "auto"}`);
  // Not while a set_mode is on its way: an event arriving before its ack (an auto shoe's
  // shoe_revealed does) must not flip the box back under the dealer's click.
  if (!sent.some((c) => c.type === "set_mode")) $("#mode").checked = st.mode === "auto";
  $("#d-round").textContent = st.round_no ? t("table.round", { n: st.round_no }) : "—";
  $("#d-cards-left").textContent = st.cards_left === null || st.cards_left === undefined ? "—" : money(st.cards_left);
  $("#d-cut").textContent = st.cut_card_out ? t("dealer.cut_out") : t("dealer.cut_in");
  $("#d-cut").dataset.out = st.cut_card_out ? "1" : "0";
  $("#d-last").textContent = st.last_round || st.cut_card_out ? t("dealer.yes") : t("dealer.no");
  $("#d-shoe").textContent = st.shoe_id || "—";

  const p = st.phase;
  const roundLive = ["betting", "dealing", "revealing"].includes(p);
  $("#start-shoe").disabled = roundLive || p === "paused";
  $("#mode").disabled = roundLive || p === "paused";
  $("#open").disabled = roundLive || p === "paused";
  $("#close").disabled = p !== "betting";
  $("#reveal").disabled = p !== "revealing";
  $("#pause").disabled = p === "paused";
  $("#resume").disabled = p !== "paused";
  $("#cancel").disabled = !(roundLive || p === "paused");
  const me = whoAmI();
  $("#whoami").replaceChildren(...(me ? tName("dealer.whoami", me.name || "?", { kind: t(`dealer.kind_${me.kind}`), tables: (me.tables || []).map((x) => (x === "*" ? t("dealer.all_tables") : x)).join(", ") || "—" }) : []));
  const correctable = st.mode === "manual" && entered.length > 0 && !Object.keys(st.hands).length
    && ["betting", "dealing", "revealing"].includes(p);
  $("#correct").disabled = !correctable;
  $("#correction-count").max = String(Math.max(1, entered.length));
  $("#approval-field").hidden = !!(me && me.kind === "supervisor");
  $("#issue-approval").hidden = !(me && me.kind === "supervisor");
  $("#correction").hidden = st.mode !== "manual";
  renderEntered();
  const next = nextReveal();
  $("#reveal-next").textContent = ["dealing", "revealing"].includes(p) && next ? t("dealer.next", { hand: spotName(next) }) : "";

  $("#placed").textContent = lastPlaced
    ? `${lastPlaced.card} → ${slotName(lastPlaced.slot)}${lastPlaced.n ? ` · ${t("dealer.card_n", { n: lastPlaced.n })}` : ""}`
    : "";
  $("#placed").dataset.slot = lastPlaced ? String(lastPlaced.slot) : "";
  renderLayout();
  tick();
}

function renderEntered() {
  $("#entered").replaceChildren(...entered.map((e, i) => h("li", { "data-testid": "dealer-entered-card", "data-card": e.card, "data-slot": e.slot },
    `${slotName(e.slot)}${e.n ? ` · ${t("dealer.card_n", { n: e.n })}` : ""}: `, h("strong", { text: e.card }),
    i === entered.length - 1 ? h("span", { class: "muted small", text: ` ← ${t("dealer.last_entered")}` }) : "")));
}

function renderLayout() {
  const slots = ["burn", ...HANDS];
  const layout = $("#layout");
  const typed = typedBySlot();
  layout.replaceChildren(...slots.map((slot) => {
    const revealed = st.hands[slot];
    const mine = typed[slot] || typed[slot.toUpperCase()] || [];
    const cards = revealed ? revealed.cards : mine;
    const down = Math.max(0, (st.dealt[slot] || 0) - cards.length);
    const box = h("div", { class: "layout__slot", "data-testid": `dealer-slot-${slot}` },
      h("strong", { text: slot === "burn" ? t("dealer.slot_burn") : slot === "BANKER" ? t("hand.banker") : slot }),
      h("div", { class: "cards-inline" }, ...cards.map((c) => cardEl(c, { small: true })),
        ...Array.from({ length: down }, () => cardBackEl({ small: true }))),
      revealed ? h("span", { class: "small", text: handLabel(revealed.value) }) : "");
    return box;
  }));
}

function tick() {
  const el = $("#d-countdown");
  if (!el || !st) return;
  if (st.phase === "betting" && st.closes_at) {
    const ms = Math.max(0, st.closes_at - serverNow());
    el.textContent = t("countdown.seconds", { s: Math.ceil(ms / 1000) });
  } else el.textContent = "—";
  const next = $("#d-next-round");
  if (["idle", "settled", "cancelled"].includes(st.phase) && st.opens_at) {
    next.textContent = t("dealer.opens_in", { s: Math.max(0, Math.ceil((st.opens_at - serverNow()) / 1000)) });
  } else next.textContent = ["idle", "settled", "cancelled"].includes(st.phase) ? t("dealer.opens_by_dealer") : "—";
}

main();
