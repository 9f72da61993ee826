// The table page's frames from the server: the welcome (and what a reconnect resends), the
// table events, the player's own frames (slips and bets answered, bets settled, the
// balance), a fatal refusal or an ended session; the balance shared with the player's other
// tabs; a demo guest who starts again.

import { t } from "./i18n.js";
import { $, $$, money, setCurrency, spotName, handLabel, announce } from "./common.js";
import { serverNow } from "./clock.js";
import { fromSnapshot, applyEvent } from "./state.js";
import { ensureGuest, forgetGuest, rememberPlayer } from "./api.js";
import { noteSnapshot, noteTableEvent } from "./verify.js";
import { forgetSession } from "./operator.js";
import { rememberEnd, showEnded, keepLimits } from "./session.js";
import { play, say } from "./atmosphere.js";
import { render } from "./tablefelt.js";
import { buildChips, sendSlip, newRoundBets, closeDrafts } from "./tablebets.js";
import { placeToasts, clearBetToasts, hideToast, showError, notice, showRealityCheck, rejectText, errorText, resultsSentence, settledSentence } from "./tableresults.js";
import { markSeen, restoreFromRecord, openResumeWindow, addToResumeSummary } from "./tableresume.js";
import { S, bets, balanceChannel } from "./tablestate.js";

let balanceAt = 0;          // server time of the balance shown
const seenSettled = new Set(); // bet_ids whose bet_settled this page has handled

export function onWelcome(msg, reconnect) {
  if (msg.player) {
    S.player = msg.player;
    setCurrency(S.player.currency);
    rememberPlayer(S.player);
    keepLimits(S.player);  // the rules page shows the session's currency and limits
    balanceAt = msg.server_time || serverNow();
    shareBalance();
  }
  else if (S.token) {
    // We sent a token and were welcomed as a viewer: it is not valid here any more.
    forgetGuest();
  }
  const snap = msg.table;
  noteSnapshot(snap);  // provably fair shoe: keep the commitment announced (verify.js)
  if (!msg.resumed || !S.st) {
    const before = S.st;
    S.st = fromSnapshot(snap);
    if (before && before.round_id !== S.st.round_id) newRoundBets(S.st.round_id, { away: !!reconnect });
    if (!before) bets.round_id = S.st.round_id;
    if (!reconnect) restoreFromRecord();
  } else {
    // Resumed: the missed events follow and bring us to the server's state.
    S.st.name = snap.name || S.st.name;
    S.st.limits = fromSnapshot(snap).limits;
    S.st.mode = snap.mode;
  }
  $("#table-name").textContent = S.st.name;
  buildChips();

  // Slips sent before the drop: send again, same slip_id and bet_ids — taken once.
  const slips = new Map();
  for (const p of bets.pending.values()) {
    p.resent = true;
    if (!slips.has(p.slip_id)) slips.set(p.slip_id, []);
    slips.get(p.slip_id).push(p);
  }
  for (const [slipId, ps] of slips) sendSlip(slipId, ps);

  S.catchUpHead = msg.seq;
  if (reconnect) openResumeWindow(msg.resumed);
  render();
}

/** The operator's session is over: said in the page's language, with the way back to the
 *  operator, and kept for this tab so that a reload says it again (session.js). */
export function endSession(reason) {
  forgetSession();
  S.token = null;
  S.sessionEnded = reason || "";
  rememberEnd(S.sessionEnded);
  $("#reality-check").hidden = true;
  hideToast("#bet-error");
  showEnded($("#banner-session-ended"), S.sessionEnded);
  const phase = $("#phase");
  phase.textContent = t("phase.session_ended");
  phase.dataset.phase = "ended";
  for (const b of $$(".betbar button")) b.disabled = true;  // nothing to bet with any more
  if (S.st) render();
}

export function onFatal(err) {
  if (err.code === "session_ended") {
    // Only the operator can start another session: say why this one ended, and stop.
    endSession(err.reason);
    return;
  }
  if (S.token && S.player && S.player.currency && ["bad_token", "token_expired"].includes(err.code)) {
    // An operator's session ended: only the operator can start another.
    endSession("token_expired");
    return;
  }
  if (S.token && ["bad_token", "invalid_token", "token_expired", "unauthorized"].includes(err.code)) {
    // The kept guest is gone (its token expired, or a fresh server): say so in the page's
    // language before the page becomes another guest with another demo balance.
    forgetGuest();
    S.token = null;
    notice(t("guest.expired"), { kind: "warn" });
    ensureGuest().then((g) => { if (g) { S.token = g.token; S.player = g.player; } S.conn.setTable(S.tableId); });
    return;
  }
  showError(errorText(err.code, err.message));
}

export function onTableEvent(ev) {
  if (S.catchUpHead !== null && ev.seq > S.catchUpHead) S.catchUpHead = null;  // live from here
  if (!S.st) return;
  const live = S.catchUpHead === null;  // no sounds or call-outs for what is caught up on
  const prevRound = S.st.round_id;
  applyEvent(S.st, ev);
  placeToasts();
  noteTableEvent(ev);  // shoe_started: keep its commitment; shoe_revealed: offer to verify
  switch (ev.type) {
    case "round_opened":
      if (ev.round_id !== prevRound) { newRoundBets(ev.round_id); clearBetToasts(); }
      announce(t("announce.betting_open", { n: ev.round_no }));
      if (live) say(t("voice.place_bets"));
      break;
    case "betting_closed":
      closeDrafts();
      announce(t(`phase.${S.st.phase}`));
      if (live) say(t("voice.no_more_bets"));
      break;
    case "card_dealt":
      if (live) play("card");
      break;
    case "shoe_shuffling":
      announce(t("banner.new_shoe"));
      break;
    case "shoe_started":
      if (S.catchUpHead === null) { S.newShoeUntil = Date.now() + 4000; setTimeout(render, 4100); }
      break;
    case "hand_revealed":
      S.justRevealed = ev.hand;
      announce(`${spotName(ev.hand)}: ${handLabel(ev.value)}`);
      if (live) play("flip");
      break;
    case "round_settled":
      announce(resultsSentence(ev.results));
      if (live) say(resultsSentence(ev.results));
      // the operator's balance once its credit is in (it is sent right after settlement)
      if (S.player && S.player.currency) setTimeout(() => S.conn.send({ type: "get_balance" }), 1500);
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

export function onPrivate(msg) {
  switch (msg.type) {
    case "slip_accepted":  // each bet of the slip, as its own acceptance
      clearBetToasts();  // a warning or refusal about an earlier draft no longer holds
      for (const b of msg.bets) {
        onPrivate({ type: "bet_accepted", bet_id: b.bet_id, round_id: msg.round_id, spot: b.spot,
          amount: b.amount, deducted: b.deducted, balance: msg.balance });
      }
      return;
    case "slip_rejected":  // the whole slip: none of its bets was taken
      onSlipRejected(msg);
      break;
    case "bet_accepted":
      onBetAccepted(msg);
      break;
    case "bet_rejected":
      onBetRejected(msg);
      break;
    case "bet_settled":
      onBetSettled(msg);
      break;
    case "reality_check":
      showRealityCheck(msg);
      break;
    case "balance":
      setBalance(msg.balance);
      break;
    case "presence":  // players online at the table (docs/protocol.md)
      S.online = typeof msg.online === "number" ? msg.online : null;
      break;
    case "bets":
      break;
    case "tip_accepted":  // tipping.js says thanks; an operator's balance is asked for
      if (S.player && S.player.currency) S.conn.send({ type: "get_balance" });
      else setBalance(msg.balance);
      break;
    case "error":  // a tip's is tipping.js's to say
      if (msg.tip_id == null) showError(errorText(msg.code, msg.message));
      break;
    default:
      break;
  }
  render();
}

/** The whole slip refused: none of its bets was taken. */
function onSlipRejected(msg) {
  const mine = [...bets.pending.values()].filter((p) => p.slip_id === msg.slip_id);
  for (const p of mine) bets.pending.delete(p.bet_id);
  const p = mine.find((x) => x.bet_id === msg.bet_id);
  // name the bet that failed, or, when the slip failed as a whole, every bet of it
  const named = p ? [p] : mine;
  const what = named.length
    ? `${named.map((x) => `${spotName(x.spot)} ${money(x.amount)}`).join(", ")}: ` : "";
  const resent = mine.some((x) => x.resent) ? `${t("notice.resent_no")} ` : "";
  showError(what + resent + rejectText(msg.code, msg.message, p));
}

/** A bet taken (alone, or one of a slip's): it is confirmed on its spot. */
function onBetAccepted(msg) {
  const p = bets.pending.get(msg.bet_id);
  bets.pending.delete(msg.bet_id);
  if (p) clearBetToasts();  // a later bet taken: an earlier refusal no longer stands
  if (msg.round_id === bets.round_id) {
    bets.confirmed[msg.spot] = (bets.confirmed[msg.spot] || 0) + msg.amount;
  }
  bets.unsettled.set(msg.bet_id, { ...msg });
  // The answer to a resend may be the server's first answer again, with the balance of
  // that moment: trust it only while its round is still the one taking bets.
  if (!(p && p.resent) || msg.round_id === (S.st && S.st.round_id)) setBalance(msg.balance);
  if (p && p.resent) {
    notice(t("notice.resent_ok", { spot: spotName(msg.spot), amount: money(msg.amount) }));
  }
  if (p || msg.round_id === bets.round_id) {
    announce(t("announce.accepted", { spot: spotName(msg.spot), amount: money(msg.amount),
      deducted: money(msg.deducted) }));
  }
}

/** A bet refused; our resend of a bet already taken is no refusal: it stands. */
function onBetRejected(msg) {
  const p = bets.pending.get(msg.bet_id);
  bets.pending.delete(msg.bet_id);
  if (msg.code === "duplicate_bet_id" && p) {
    // Our resend of a bet the server had already taken: it stands.
    if (p.round_id === bets.round_id) bets.confirmed[p.spot] = (bets.confirmed[p.spot] || 0) + p.amount;
    bets.unsettled.set(p.bet_id, { ...p });
    return;
  }
  const what = p ? `${spotName(p.spot)} ${money(p.amount)}: ` : "";
  showError(what + (p && p.resent ? `${t("notice.resent_no")} ` : "") + rejectText(msg.code, msg.message, p));
}

/** A bet's result, live or caught up on after a welcome. */
function onBetSettled(msg) {
  // After a welcome the server first sends what we missed (the replay's results, or
  // our latest results at this table): a bet we already saw settle is dropped, and
  // until a live table event arrives their balances are older than the welcome's.
  if (seenSettled.has(msg.bet_id)) return;
  seenSettled.add(msg.bet_id);
  const catchUp = S.catchUpHead !== null;
  const wasOpen = bets.unsettled.delete(msg.bet_id);
  markSeen(true);
  // an operator's session: the balance is the operator's (asked after the round)
  if (!catchUp && !(S.player && S.player.currency)) setBalance(msg.balance);
  if (msg.round_id === bets.round_id || msg.round_id === (S.st && S.st.round_id)) {
    bets.settled.push(msg);
  }
  if (S.resumeWindow) {
    if (!catchUp || wasOpen || S.resumeWindow.resumed) addToResumeSummary(msg);
  } else if (!catchUp) announce(settledSentence(msg));
}

function setBalance(b) {
  if (typeof b !== "number") return;
  if (!S.player) S.player = { id: "", name: "", balance: b };
  S.player.balance = b;
  rememberPlayer(S.player);
  balanceAt = serverNow();
  shareBalance();
}

/** Tell the player's other tabs: they show the same balance without waiting for a frame. */
function shareBalance() {
  if (!balanceChannel || !S.player || !S.player.id) return;
  balanceChannel.postMessage({ player: S.player.id, balance: S.player.balance, at: balanceAt });
}

export function onOtherTabBalance(m) {
  // Newest wins: a tab's older news (a frame that crossed ours) changes nothing.
  if (!m || !S.player || m.player !== S.player.id || typeof m.balance !== "number" || m.at <= balanceAt) return;
  balanceAt = m.at;
  S.player.balance = m.balance;
  render();
}

export async function resetGuest() {
  const button = $("#guest-reset");
  button.disabled = true;
  forgetGuest();
  try {
    const g = await ensureGuest();
    if (!g) throw new Error("no guest");
    S.token = g.token;
    S.player = g.player || null;
    balanceAt = serverNow();
    bets.last = {};
    bets.unsettled.clear();
    bets.confirmed = {};
    bets.settled = [];
    S.conn.setTable(S.tableId);  // reconnect as the new guest
    notice(t("wallet.reset_done", { balance: money(S.player ? S.player.balance : 0) }));
  } catch {
    showError(t("wallet.reset_failed"));
  } finally {
    button.disabled = false;
    render();
  }
}
