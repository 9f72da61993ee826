// The table page's felt: its layout (the Banker, the five positions with their two spots
// each, the limits), and drawing the table as state.js knows it — the phase and countdown,
// the hands face down and face up with their results, the stakes on each spot, the wallet,
// players online and the banners. render() draws it all; the other modules call it.

import { t, lang } from "./i18n.js";
import { $, h, money, stakeMoney, count, displayName, spotName, handLabel } from "./common.js";
import { serverNow } from "./clock.js";
import { POSITIONS, SPOTS, isPairSpot, deductedFor, spotOdds, rulesPayouts } from "./state.js";
import { renderStats } from "./stats.js";
import { cardEl, cardBackEl } from "./cards.js";
import { renderRoadmap, roadmapLegend } from "./roadmap.js";
import { storedGuest } from "./api.js";
import { renderStrip } from "./history.js";
import { mountBetTools } from "./bettools.js";
import { withCurrency } from "./operator.js";
import { bindAtmosphere, play } from "./atmosphere.js";
import { betLimits, buildChips, canBet, pendingOn, placeChip, undo, clearDraft, rebet, double, confirmBets, closeDrafts, autoConfirm, renderControls, betting, inPlay } from "./tablebets.js";
import { renderPayout, renderResumeTotal, renderSound, toggleSound } from "./tableresults.js";
import { resetGuest } from "./tableframes.js";
import { renderConnection } from "./tableresume.js";
import { S, bets, prefs, writePref, PREF_AUTO_CONFIRM } from "./tablestate.js";

// Auto-confirm sends the draft this long before the countdown ends: the server judges a bet
// by when it arrived, so this covers a slow network with room to spare.
const AUTO_CONFIRM_MS = 1200;

export function buildLayout() {
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
  mountBetTools($("#betbar"), betting);
  $("#resume-dismiss").addEventListener("click", () => { $("#resume-summary").hidden = true; });
  $("#reality-ack").addEventListener("click", () => {
    S.conn.send({ type: "reality_check_ack" });
    $("#reality-check").hidden = true;
  });
  $("#btn-roadmap").addEventListener("click", () => showRoadmap(document.body.dataset.sheet !== "roadmap"));
  $("#roadmap-close").addEventListener("click", () => showRoadmap(false));
  $("#btn-chat").addEventListener("click", () => showChat(document.body.dataset.sheet !== "chat"));
}

/** "Chat" on a phone: held upright the panel is below the betting screen (scrolled to);
 * held sideways it is a sheet beside the video (opened and closed). */
export function showChat(open) {
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

export function render() {
  if (!S.st) return;
  document.title = `${S.st.name} — ${t("app.name")}`;
  renderStatus();
  renderHands();
  renderSpots();
  renderControls();
  renderWallet();
  renderPayout();
  renderBanners();
  renderRoadmap($("#roadmap"), S.st.roadmap);
  renderStrip(S.st.roadmap);
  const n = S.st.roadmap.length;
  $("#roadmap-count").textContent = t(n === 1 ? "roadmap.count_one" : "roadmap.count", { n });
  renderStats($("#stats"), S.st.roadmap);
  renderOnline();
  renderLimits();
  renderSound();
  renderConnection();
}

function renderOnline() {
  const el = $("#online");
  el.hidden = S.online === null;
  el.dataset.online = S.online === null ? "" : String(S.online);
  // a count of people, not money: the page's number format, never a currency
  if (S.online !== null) el.textContent = t(S.online === 1 ? "online.count_one" : "online.count", { n: count(S.online) });
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
  $("#round-no").textContent = S.st.round_no ? t("table.round", { n: S.st.round_no }) : "";
  const phase = $("#phase");
  phase.textContent = S.sessionEnded === null ? t(`phase.${S.st.phase}`) : t("phase.session_ended");
  phase.dataset.phase = S.sessionEnded === null ? S.st.phase : "ended";
  $("#mode").textContent = t(`mode.${S.st.mode || "auto"}`);
  tickCountdown();
}

export function tickCountdown() {
  const el = $("#countdown");
  if (!el || !S.st) return;
  const bar = $("#countdown-bar");
  // Connection lost: the table's time is unknown, so the countdown stands still (and says
  // so) rather than run to a close that may have moved (a pause) or come and gone.
  const frozen = !!(S.conn && S.conn.everWelcomed && !S.conn.online);
  el.dataset.frozen = frozen ? "1" : "0";
  if (frozen) return;
  const betting = S.st.phase === "betting" && S.st.closes_at;
  const ms = betting ? Math.max(0, S.st.closes_at - serverNow()) : 0;
  const s = Math.ceil(ms / 1000);
  // the last five seconds, one tick each (a longer tone for the last), when turned on; a
  // page whose timers were held back past the last second (a busy page: the betting may
  // even have closed before its next update) sounds the last tone at the close, not never
  if (ms > 0 && s <= 5 && el._ticked !== `${S.st.round_id}:${s}`) {
    el._ticked = `${S.st.round_id}:${s}`;
    if (s === 1) el._lastFor = S.st.round_id;
    play(s === 1 ? "last" : "tick");
  } else if (ms <= 0 && el._lastFor !== S.st.round_id
             && (el._ticked || "").startsWith(`${S.st.round_id}:`)) {
    el._lastFor = S.st.round_id;
    play("last");
  }
  if (betting) {
    el.dataset.remainingMs = String(Math.round(ms));
    el.textContent = ms > 0 ? t("countdown.seconds", { s }) : t("countdown.closing");
    el.dataset.state = ms > 0 ? (s <= 5 ? "urgent" : "open") : "closed";
    if (!el._total || el._round !== S.st.round_id) { el._total = Math.max(ms, 1000); el._round = S.st.round_id; }
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

function renderHands() {
  const resultOf = Object.fromEntries((S.st.results || []).map((r) => [r.hand, r]));
  for (const hand of ["BANKER", ...POSITIONS]) {
    const box = $(`#hand-${hand}`);
    box.querySelector(".hand__title").textContent = spotName(hand);
    const cards = box.querySelector(".hand__cards");
    const value = box.querySelector(".hand__value");
    const view = S.st.hands[hand];
    const small = hand !== "BANKER";
    if (view) {
      const sig = view.cards.join(" ");
      if (cards.dataset.sig !== sig) {
        cards.replaceChildren(...view.cards.map((c) => cardEl(c, { small })));
        cards.dataset.sig = sig;
        if (S.justRevealed === hand) box.classList.add("hand--flip");
        setTimeout(() => box.classList.remove("hand--flip"), 600);
      }
      value.replaceChildren(
        h("span", { class: "hand__label", text: handLabel(view.value) }),
        view.flush ? h("span", { class: "tag tag--flush", text: t("tag.flush") }) : "",
        view.pair ? h("span", { class: "tag tag--pair", text: t("tag.pair") }) : "");
      value.dataset.value = view.value;
      box.dataset.revealed = "1";
    } else {
      const n = S.st.dealt[hand] || 0;
      const sig = `down:${n}`;
      if (cards.dataset.sig !== sig) {
        cards.replaceChildren(...Array.from({ length: n }, () => cardBackEl({ small })));
        cards.dataset.sig = sig;
      }
      value.replaceChildren();
      value.dataset.value = "";
      box.dataset.revealed = "0";
    }
    box.dataset.dealt = String(view ? view.cards.length : S.st.dealt[hand] || 0);
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
  const resultOf = Object.fromEntries((S.st.results || []).map((r) => [r.hand, r]));
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
      if (confirmed) stake.append(h("span", { class: "stake stake--confirmed", text: stakeMoney(confirmed) }));
      if (pend) {
        stake.append(h("span", { class: "stake stake--pending", title: t("spot.pending"),
          text: (confirmed ? "+" : "") + stakeMoney(pend) }));
      }
      if (draft) stake.append(h("span", { class: `stake stake--draft${dropped}`, text: (confirmed + pend ? "+" : "") + stakeMoney(draft) }));
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

export function renderWallet() {
  const el = $("#balance");
  if (!S.player) { el.textContent = "—"; el.dataset.value = ""; return; }
  el.textContent = withCurrency(money(S.player.balance), S.player);
  el.dataset.value = String(S.player.balance);
  renderResumeTotal();
  $("#player-name").textContent = displayName(S.player.name || "");
  const amount = inPlay();
  $("#in-play").textContent = amount ? t("wallet.in_play", { amount: money(amount) }) : "";
  $("#in-play").dataset.value = String(amount);
  // A demo guest who can no longer afford the smallest bet may start again.
  const lim = betLimits();
  const smallest = Math.min(deductedFor("P1_PAIR", lim.pair_min ?? lim.min), deductedFor("P1", lim.min));
  $("#guest-reset").hidden = !(S.token && storedGuest() && S.player.balance < smallest && !amount
    && !Object.keys(bets.draft).length);
}

function renderBanners() {
  const paused = $("#banner-paused");
  paused.hidden = S.st.phase !== "paused";
  if (!paused.hidden) paused.textContent = t("banner.paused", { reason: S.st.paused_reason || "—" });
  const cancelled = $("#banner-cancelled");
  cancelled.hidden = S.st.phase !== "cancelled";
  if (!cancelled.hidden) cancelled.textContent = t("banner.cancelled", { reason: S.st.cancel_reason || "—" });
  const last = $("#banner-last");
  last.hidden = !(S.st.last_round || S.st.cut_card_out) || S.st.phase === "idle";
  if (!last.hidden) last.textContent = t("banner.last_round");
  const shoe = $("#banner-shoe");
  // "next round opens once the opening card is out": true until the shoe's first round
  // opens (round_no 0 between shoe_started and round_opened), never while one is open
  shoe.hidden = !(S.st.shuffling || (Date.now() < S.newShoeUntil && !S.st.round_no));
  if (!shoe.hidden) shoe.textContent = t("banner.new_shoe");
  const viewer = $("#banner-viewer");
  viewer.hidden = !!(S.token && S.player);
  if (!viewer.hidden) viewer.textContent = t("warn.viewer");
}
