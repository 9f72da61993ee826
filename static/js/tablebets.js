// The table page's bets: the chips, and the draft → pending → confirmed stages (table.js
// says what each means). Draft edits (place, undo, clear, rebet, double), the checks
// against the balance and the limits before anything is sent, Confirm as one slip, the
// drafts a countdown ends on, the bet bar, and the keyboard.

import { t } from "./i18n.js";
import { $, $$, h, money, chipMoney, currencyDecimals, spotName, announce } from "./common.js";
import { serverNow } from "./clock.js";
import { SPOTS, isPairSpot, deductedFor } from "./state.js";
import { newBetId } from "./api.js";
import { renderBetTools } from "./bettools.js";
import { renderAutoplay } from "./autoplay.js";
import { play } from "./atmosphere.js";
import { render } from "./tablefelt.js";
import { warn, notice, hideWin } from "./tableresults.js";
import { S, bets, prefs } from "./tablestate.js";

let chip = null;            // selected chip value

const CHIP_VALUES = [5, 10, 25, 50, 100, 500, 1000, 5000, 10000];

/** The limits this player's bets are held to: their session's, when their operator gives
 *  its currency its own (welcome.player.limits, minor units), else the table's. */
export function betLimits() {
  return (S.player && S.player.limits) || (S.st ? S.st.limits : { min: 10, max: 5000, pair_min: 10, pair_max: 1000 });
}

function allowedChips() {
  if (S.player && S.player.chips && S.player.chips.length) return S.player.chips;  // the operator's
  const lim = betLimits();
  const lo = Math.min(lim.min, lim.pair_min ?? lim.min);
  const hi = Math.max(lim.max, lim.pair_max ?? lim.max);
  let chips = CHIP_VALUES.filter((v) => v >= lo && v <= hi);
  if (!chips.length) chips = [lo];
  if (chips.length > 6) chips = chips.slice(0, 6);
  return chips;
}

export function buildChips() {
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
    const kind = !S.player ? "all" : Math.min(pairNeeds, playerNeeds) > left ? "none"
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
export function compactMoney(v) {
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

export function sendSlip(slipId, ps) {
  S.conn.send({ type: "place_bets", slip_id: slipId, round_id: ps[0].round_id,
    bets: ps.map((p) => ({ bet_id: p.bet_id, spot: p.spot, amount: p.amount })) });
}

export function newRoundBets(roundId, { away = false } = {}) {
  closeDrafts({ away });  // a round that ended unseen (say, while reconnecting) still says so
  if (Object.keys(bets.confirmed).length) bets.last = { ...bets.confirmed };
  bets.round_id = roundId;
  bets.confirmed = {};
  bets.draft = {};
  bets.history = [];
  bets.settled = [];
  bets.unplaced = {};
  bets.autoTried = null;
  S.justRevealed = null;
  hideWin();
  // "While you were away" stays through the round that opens next, for the player to read
  // on arrival; it closes with OK, with their first chip, or when the round after opens.
  const summary = $("#resume-summary");
  summary.dataset.roundsOpened = String(Number(summary.dataset.roundsOpened || 0) + 1);
  if (Number(summary.dataset.roundsOpened) >= 2) summary.hidden = true;
}

function bettingOpen() {
  return !!(S.st && S.st.phase === "betting" && S.st.closes_at && S.st.closes_at - serverNow() > 0);
}

export function canBet() { return bettingOpen() && !!S.token && !!S.player && S.conn && S.conn.online; }

export function sum(obj, f = (s, a) => a) { return Object.entries(obj).reduce((acc, [s, a]) => acc + f(s, a), 0); }
export const deducted = (obj) => sum(obj, deductedFor);
export function pendingOn(spot) {
  let a = 0;
  for (const p of bets.pending.values()) if (p.spot === spot && p.round_id === bets.round_id) a += p.amount;
  return a;
}
export function pendingDeducted() {
  let a = 0;
  for (const p of bets.pending.values()) a += deductedFor(p.spot, p.amount);
  return a;
}
/** What the balance can still cover: the server's balance less bets sent but not yet answered. */
function available() { return S.player ? S.player.balance - pendingDeducted() : 0; }

/** Why `draft` cannot be sent, or null. */
function draftProblem(draft) {
  if (!S.st) return null;
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
  $("#resume-summary").hidden = true;  // its balance is stale once the player bets again
  if (announceIt) announce(t("announce.draft", { deducted: money(deducted(next)) }));
  render();
  return true;
}

export function placeChip(spot) {
  if (!canBet()) { warn(whyNoBet()); return; }
  const next = { ...bets.draft, [spot]: (bets.draft[spot] || 0) + chip };
  if (setDraft(next, { announceIt: false })) {
    play("chip");
    announce(t("announce.placed", { spot: spotName(spot), amount: money(next[spot]),
      deducted: money(deducted(next)) }));
  }
}

export function undo() {
  if (!bets.history.length) return;
  bets.draft = bets.history.pop();
  render();
}

export function clearDraft() {
  if (!Object.keys(bets.draft).length) return;
  bets.history.push({ ...bets.draft });
  bets.draft = {};
  render();
}

export function rebet() {
  if (!canBet()) { warn(whyNoBet()); return; }
  if (!Object.keys(bets.last).length) return;
  const next = { ...bets.draft };
  for (const [s, a] of Object.entries(bets.last)) next[s] = (next[s] || 0) + a;
  setDraft(next);
}

export function double() {
  if (!canBet()) { warn(whyNoBet()); return; }
  if (!Object.keys(bets.draft).length) return;
  const next = {};
  for (const [s, a] of Object.entries(bets.draft)) next[s] = a * 2;
  setDraft(next);
}

export function confirmBets({ auto = false } = {}) {
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
    { bet_id: newBetId(), slip_id: slipId, round_id: S.st.round_id, spot, amount }));
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
export function closeDrafts({ away = false } = {}) {
  const entries = Object.entries(bets.draft).filter(([, a]) => a > 0);
  bets.draft = {};
  bets.history = [];
  if (!entries.length) return;
  for (const [spot, amount] of entries) bets.unplaced[spot] = (bets.unplaced[spot] || 0) + amount;
  const list = entries.map(([spot, amount]) => `${spotName(spot)} ${money(amount)}`).join(", ");
  // Auto-confirm would have sent them: only a connection down at the close kept it from it
  // (the close is learnt from a reconnect's replay or its snapshot), not the player.
  const missed = prefs.autoConfirm && (away || S.catchUpHead !== null || !(S.conn && S.conn.online));
  notice(t(missed ? "notice.not_placed_auto" : "notice.not_placed", { bets: list }), { kind: "warn" });
  render();
}

function whyNoBet() {
  if (!S.token || !S.player) return t("warn.viewer");
  if (!S.conn || !S.conn.online) return t("warn.offline");
  if (S.st && S.st.phase === "paused") return t("reject.paused");
  return t("warn.closed");
}

const KEY_SPOTS = { Digit1: "P1", Digit2: "P2", Digit3: "P3", Digit4: "P4", Digit5: "P5",
  Digit6: "P1_PAIR", Digit7: "P2_PAIR", Digit8: "P3_PAIR", Digit9: "P4_PAIR", Digit0: "P5_PAIR" };

export function onKey(e) {
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

export function autoConfirm() {
  const sig = JSON.stringify(bets.draft);
  if (sig === "{}" || sig === bets.autoTried || !canBet()) return;
  bets.autoTried = sig;  // once per draft: a draft the balance cannot cover warns once
  confirmBets({ auto: true });
}

export function renderControls() {
  if (!S.st) return;
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
  renderBetTools();
  renderAutoplay();
}

/** The draft as the betting tools (bettools.js) see it: read, replaced, or sent. */
export const betting = {
  chip: () => chip, canBet, draft: () => ({ ...bets.draft }), setDraft, refuse: () => warn(whyNoBet()),
  confirm: () => confirmBets(), currency: () => (S.player && S.player.currency) || null,
  balance: () => (S.player ? S.player.balance : null), roundId: () => S.st && S.st.round_id, notice,
  // what a "save" keeps: the chips on the table now, this round's or else the last round's
  layout: () => (Object.keys(bets.draft).length || Object.keys(bets.confirmed).length
    ? Object.fromEntries(SPOTS.map((s) => [s, (bets.confirmed[s] || 0) + (bets.draft[s] || 0)]).filter(([, a]) => a > 0))
    : { ...bets.last }),
};

function whyNoBetSoft() {
  if (!S.token || !S.player) return t("warn.viewer");
  if (S.conn && !S.conn.online) return t("warn.offline");
  if (S.st.phase === "betting") return t("countdown.closing");
  // paused while taking bets: they are taken again in this round, not the next
  if (S.st.phase === "paused" && S.st.resume_phase === "betting") return t("bet.paused_resumes");
  return t("bet.wait");
}

/** What the balance has given to bets not settled yet: bets sent and unanswered, and the
 * bets accepted for the round in play. Once the table says the round settled or was
 * cancelled, its bets are no longer in play, whether or not their results have come. */
export function inPlay() {
  let a = pendingDeducted();
  const over = !S.st || S.st.phase === "settled" || S.st.phase === "cancelled";
  for (const b of bets.unsettled.values()) {
    if (over || b.round_id !== S.st.round_id) continue;
    a += typeof b.deducted === "number" ? b.deducted : deductedFor(b.spot, b.amount);
  }
  return a;
}
