// The table page's messages and results: the toasts at the top of the table (a warning,
// an error, a notice) and the words for the server's refusals, the reality check, the
// round's payout and "You win" on the felt with its chime, and the sentences that say a
// round's results and a bet's settlement (also in the "while you were away" summary).

import { t } from "./i18n.js";
import { $, h, money, signed, spotName, announce } from "./common.js";
import { isPairSpot, deductedFor } from "./state.js";
import { audioContext } from "./atmosphere.js";
import { betLimits } from "./tablebets.js";
import { S, bets, prefs, writePref, PREF_SOUND } from "./tablestate.js";

let winShown = null;        // round whose result is on the felt
let winChimed = null;       // round whose win was announced (and its sound played)
let winTimer = null;
let winDue = null;
let audio = null;           // the AudioContext, made on the first user gesture that needs it

const WIN_SHOWN_MS = 6000;
const WIN_SETTLE_MS = 300;

// Toasts at the top of the table: a warning (this chip, this spot, not now), an error (the
// server said no) and a notice (what became of bets). Each replaces its previous text.
function toast(id, text, ms, urgent) {
  placeToasts();
  const el = $(id);
  el.textContent = text;
  el.hidden = false;
  announce(text, { urgent });
  clearTimeout(el._timer);
  el._timer = setTimeout(() => { el.hidden = true; }, ms);
}

// While the hands are face up and the results on the felt, a toast would sit on them
// (a "too late" after a reconnect covered the Banker's cards and the win for 10 s): then the
// toasts drop to the bottom of the screen, away from the hands.
export function placeToasts() {
  const low = !!S.st && ["revealing", "settled"].includes(S.st.phase);
  $("#toasts").dataset.low = low ? "1" : "";
}

/** What was said about an earlier round's bets no longer holds once another opens. */
export function clearBetToasts() { hideToast("#bet-error"); hideToast("#bet-warning"); }

export function warn(text) { toast("#bet-warning", text, 6000, true); }
export function hideToast(id) { const el = $(id); clearTimeout(el._timer); el.hidden = true; }
export function showError(text) { toast("#bet-error", text, 10000, true); }
export function notice(text, { kind = "info" } = {}) {
  $("#bet-notice").dataset.kind = kind;
  toast("#bet-notice", text, 9000, kind !== "info");
}

// A reality check: the session's figures as the server counted them, and a button to go
// on (slips are refused until it is pressed).
export function showRealityCheck(msg) {
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
// (betting.slips.DETAILS); read here only to show the amounts in the session's currency.
const RG_DETAIL = /\((max_stake_per_round|loss_limit): (\d+) left of (\d+)\)/;

export function rejectText(code, message, bet) {
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

export function errorText(code, message) {
  const key = `error.${code}`;
  const text = t(key);
  return text === key ? t("error.unknown", { code, message: message || "" }) : text;
}

export function renderPayout() {
  const box = $("#payout");
  const list = bets.settled.filter((s) => s.round_id === bets.round_id || s.round_id === S.st.round_id);
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
    if (prefs.sound && !S.resumeWindow) chime();  // no fanfare for results caught up on
  }
  clearTimeout(winTimer);
  winTimer = setTimeout(() => { el.hidden = true; }, WIN_SHOWN_MS);
}

export function hideWin() {
  clearTimeout(winTimer);
  clearTimeout(winDue);
  const el = $("#win");
  if (el) el.hidden = true;
}

export function renderSound() {
  const b = $("#sound");
  b.setAttribute("aria-pressed", prefs.sound ? "true" : "false");
  b.textContent = prefs.sound ? `♪ ${t("sound.on")}` : `♪̸ ${t("sound.off")}`;
  b.title = t("sound.label");
}

export function toggleSound() {
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

export function resultsSentence(results) {
  return (results || []).map((r) => `${spotName(r.hand)}: ${t(`result.${r.outcome}`)}${r.odds > 1 && r.outcome !== "tie" ? ` ${r.odds}:1` : ""}`).join("; ");
}

export function settledSentence(s) {
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

export function showResumeSummary(list) {
  const box = $("#resume-summary");
  const ul = $("#resume-list");
  ul.replaceChildren(...list.map((s) => h("li", { "data-testid": "resume-item", "data-bet-id": s.bet_id },
    settledSentence(s))));
  box.dataset.returned = String(list.reduce((a, s) => a + (s.returned || 0), 0));
  box.dataset.balance = String(list[list.length - 1].balance);
  box.dataset.roundsOpened = "0";
  box.hidden = false;
  renderResumeTotal();
  announce(`${t("resume.title")} ${$("#resume-total").textContent}`);
}

/** The summary's last line: what came back, and the balance now (kept current while the
 * summary is up: it is never left saying an old balance). */
export function renderResumeTotal() {
  const box = $("#resume-summary");
  if (box.hidden) return;
  const balance = S.player ? S.player.balance : Number(box.dataset.balance);
  $("#resume-total").textContent = t("resume.total", { returned: money(Number(box.dataset.returned)),
    balance: money(balance) });
}
