// The Bet Record: the player's bets, newest first, from GET /api/bets (Bearer = the kept
// guest token), paged with the `next` cursor. Each row shows the position's and the
// Banker's cards with their values, the odds, what came back, the net and the balance after.
// A row's round opens to every hand of that round (GET /api/rounds/{round_id}).

import { t, onLangChange } from "./i18n.js";
import { $, h, money, signed, spotName, handLabel, dateTime, initPage } from "./common.js";
import { evaluate, cardEl } from "./cards.js";
import { getJSON, storedGuest } from "./api.js";
import { verifyLink } from "./verify.js";

// Page size: 20, or ?limit=N (1–100) to page through fewer at a time.
const PAGE = Math.min(100, Math.max(1, Number(new URLSearchParams(location.search).get("limit")) || 20));
let rows = [];
let next = null;
let loading = false;

async function main() {
  initPage({ active: "records" });
  onLangChange(renderAll);
  $("#more").addEventListener("click", () => load(next));
  $("#reload").addEventListener("click", () => { rows = []; next = null; load(null); });
  await load(null);
}

async function load(before) {
  const g = storedGuest();
  const status = $("#records-status");
  if (!g || !g.token) {
    status.textContent = t("records.no_player");
    return;
  }
  if (g.player) $("#records-player").textContent = t("records.player", { name: g.player.name || g.player.id });
  if (loading) return;
  loading = true;
  status.textContent = t("records.loading");
  try {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (before) q.set("before", before);
    const res = await getJSON(`/api/bets?${q}`, { token: g.token });
    rows = rows.concat(res.bets || []);
    next = res.next || null;
    status.textContent = rows.length ? "" : t("records.empty");
  } catch (e) {
    status.textContent = e.status === 401 || e.status === 403 ? t("records.no_player") : t("records.error");
  } finally {
    loading = false;
  }
  renderAll();
}

function renderAll() {
  $("#records-body").replaceChildren(...rows.map(row));
  $("#more").hidden = !next;
}

function handCell(cards) {
  if (!cards || cards.length !== 2) return h("span", { class: "muted", text: "—" });
  const e = evaluate(cards[0], cards[1]);
  return h("span", { class: "hand-cell" },
    h("span", { class: "cards-inline" }, ...cards.map((c) => cardEl(c, { small: true }))),
    h("span", { class: "small", "data-testid": "record-value", "data-value": e ? e.value : "",
      text: e ? handLabel(e.value) : "" }));
}

function td(labelKey, content, cls) {
  return h("td", { "data-label": t(labelKey), class: cls || null }, content);
}

function row(b) {
  const settled = b.state !== "accepted";
  const outcome = b.state === "refunded" ? "refund" : b.outcome;
  const position = b.spot.slice(0, 2);
  let result;
  if (!settled) result = h("span", { class: "outcome", text: t("records.open") });
  else {
    // Odds worth showing: a Player bet's 1:1 / 2:1 either way, a Pair bet's 11:1 when it wins.
    const pairLost = b.spot.endsWith("_PAIR") && outcome !== "win";
    const odds = b.odds && outcome !== "refund" && outcome !== "tie" && !pairLost ? ` ${b.odds}:1` : "";
    result = h("span", { class: `outcome outcome--${outcome}`, "data-testid": "record-outcome",
      "data-outcome": outcome || "" }, `${t(`outcome.${outcome}`)}${odds}`);
  }
  const net = b.net ?? (settled && b.returned !== null && b.returned !== undefined ? b.returned - b.deducted : null);
  const cards = h("div", { class: "hands-cell" },
    h("span", { class: "small muted", text: spotName(position) }), handCell(b.cards),
    h("span", { class: "small muted", text: t("hand.banker") }), handCell(b.banker_cards));
  const roundLink = h("button", { type: "button", class: "btn btn--small", "data-testid": "record-round",
    "aria-expanded": "false", text: t("records.round_no", { n: b.round_no }) });
  const detail = h("div", { class: "round-detail", hidden: true });
  roundLink.addEventListener("click", () => toggleRound(b.round_id, roundLink, detail));
  return h("tr", { "data-testid": "bet-row", "data-bet-id": b.bet_id, "data-state": b.state,
    "data-returned": b.returned ?? "", "data-net": net ?? "", "data-balance-after": b.balance_after ?? "" },
  td("records.time", dateTime(b.settled_at || b.placed_at)),
  td("records.round", h("div", {}, h("div", { text: b.table }), roundLink, detail, verifyLink(b.shoe_id))),
  td("records.bet", spotName(b.spot)),
  td("records.amount", money(b.amount), "num"),
  // As the rules sheet's examples show a bet: the amount, the withholding (a Player bet's
  // second amount; none for a Pair bet) and the total deducted.
  td("records.withholding", h("span", { "data-testid": "record-withholding",
    "data-value": b.deducted - b.amount, text: money(b.deducted - b.amount) }), "num"),
  td("records.deducted", money(b.deducted), "num"),
  td("records.cards", cards),
  td("records.result", result),
  td("records.returned", settled ? money(b.returned) : "—", "num"),
  td("records.net", net === null ? "—" : h("span", { class: net > 0 ? "pos" : net < 0 ? "neg" : "", text: signed(net) }), "num"),
  td("records.balance_after", b.balance_after === null || b.balance_after === undefined ? "—" : money(b.balance_after), "num"));
}

async function toggleRound(roundId, button, detail) {
  const open = button.getAttribute("aria-expanded") === "true";
  button.setAttribute("aria-expanded", open ? "false" : "true");
  detail.hidden = open;
  if (open || detail.dataset.loaded) return;
  detail.textContent = t("records.loading");
  try {
    const r = await getJSON(`/api/rounds/${encodeURIComponent(roundId)}`);
    detail.dataset.loaded = "1";
    detail.replaceChildren(...roundHands(r));
    if (r.state === "cancelled" || r.status === "cancelled" || r.phase === "cancelled") {
      detail.append(h("div", { class: "small", text: t("banner.cancelled", { reason: r.reason || "—" }) }));
    }
  } catch {
    detail.textContent = t("records.error");
  }
}

/** The hands of a round, whatever shape the round carries them in. */
function roundHands(r) {
  let hands = [];
  if (Array.isArray(r.hands)) hands = r.hands.map((x) => [x.hand, x.cards]);
  else if (r.hands && typeof r.hands === "object") hands = Object.entries(r.hands).map(([k, v]) => [k, Array.isArray(v) ? v : v.cards]);
  else if (r.cards && typeof r.cards === "object" && !Array.isArray(r.cards)) hands = Object.entries(r.cards);
  // Results: a results list (like round_settled), or spots {P1: {outcome, odds, returned_per_unit}}.
  const results = Object.fromEntries((r.results || []).map((x) => [x.hand, x]));
  if (r.spots && typeof r.spots === "object") {
    for (const [spot, v] of Object.entries(r.spots)) {
      if (v && !spot.endsWith("_PAIR")) results[spot] = { outcome: v.outcome, odds: v.odds };
    }
  }
  const order = ["P1", "P2", "P3", "P4", "P5", "BANKER"];
  hands.sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]));
  return hands.filter(([hand]) => order.includes(hand)).map(([hand, cards]) => {
    const res = results[hand];
    const odds = res && res.odds === 2 && res.outcome !== "tie" ? " 2:1" : "";
    return h("div", { class: "small", "data-testid": "round-hand", "data-hand": hand },
      h("div", { text: spotName(hand) + (res ? ` — ${t(`result.${res.outcome}`)}${odds}` : "") }),
      handCell(cards));
  });
}

main();
