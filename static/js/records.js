// The Bet Record: the player's bets from GET /api/bets (Bearer = the session this tab was
// launched with by an operator, else the kept guest token),
// paged with the `next` cursor, laid out for a dispute: by day (with the day's totals), then
// by round — the game id (table.shoe.round, e.g. t1.3.12), the round's six hands from
// GET /api/rounds/{round_id}, the round's totals — then each bet with its bet id, the bet
// amount, the withholding beside it and the total deducted, as the rules sheet's examples
// write them (100 + 100 = 200), the result, what came back, the net and the balance after.
//
// The date filter works on the browser's calendar days. The server pages newest first, so
// a filter loads older pages until it reaches the first day asked for (or the record ends).

import { t, lang, onLangChange } from "./i18n.js";
import { $, h, tName, money, setCurrency, signed, spotName, handLabel, dateTime, initPage } from "./common.js";
import { evaluate, cardEl } from "./cards.js";
import { getJSON, storedGuest } from "./api.js";
import { launchedToken } from "./operator.js";
import { dateField, parse } from "./datefield.js";
import { isPairSpot } from "./state.js";
import { verifyLink } from "./verify.js";
import { tipsBody, tipsByDay } from "./recordtips.js";

// Page size: 20, or ?limit=N (1–100) to page through fewer at a time.
const PAGE = Math.min(100, Math.max(1, Number(new URLSearchParams(location.search).get("limit")) || 20));
const MAX_PAGES_FOR_FILTER = 50;
const HANDS = ["P1", "P2", "P3", "P4", "P5", "BANKER"];
let rows = [];
let tipRows = [];  // the tips to the dealer of the pages loaded (recordtips.js)
let next = null;
let loading = false;
// The server's totals of each day and round shown (GET /api/bets): over all the player's
// bets, not only the rows loaded here (a day, or a round, can span pages).
const dayTotals = new Map();
const roundTotals = new Map();
const rounds = new Map(); // round_id → round view | "open" | "error" | Promise

async function main() {
  initPage({ active: "records" });
  onLangChange(renderAll);
  $("#more").addEventListener("click", () => load(next));
  $("#reload").addEventListener("click", () => {
    rows = []; tipRows = []; next = null; rounds.clear(); dayTotals.clear(); roundTotals.clear(); load(null);
  });
  $("#records-filter").addEventListener("submit", (e) => { e.preventDefault(); applyFilter(); });
  $("#filter-clear").addEventListener("click", () => {
    for (const el of [$("#from"), $("#to")]) { el.value = ""; el.dataset.iso = ""; }
    renderAll();
  });
  dateField($("#from"));  // in the page's locale, not the browser's
  dateField($("#to"));
  await load(null);
}

let launched = false;  // an operator's session (seamless wallet): no "Balance after"

/** Whose record: the operator's session of this tab first (a launched player has no guest
 *  token), else this browser's guest. The name shown is the token's own claim. */
function player() {
  const token = launchedToken();
  launched = !!token;
  // An operator's player: the balance is the operator's wallet, which the Bet Record
  // does not know (the API gives none), so there is no "Balance after" column.
  const th = document.querySelector('th[data-i18n="records.balance_after"]');
  if (th) th.hidden = launched;
  if (token) {
    try {
      const bytes = Uint8Array.from(atob(token.split(".")[0].replace(/-/g, "+").replace(/_/g, "/")),
        (c) => c.charCodeAt(0));
      const claims = JSON.parse(new TextDecoder().decode(bytes));
      setCurrency(claims.cur);
      return { token, player: { id: claims.sub, name: claims.name } };
    } catch { return { token, player: null }; }
  }
  return storedGuest();
}

async function load(before) {
  const g = player();
  const status = $("#records-status");
  if (!g || !g.token) {
    status.textContent = t("records.no_player");
    return false;
  }
  if (loading) return false;
  loading = true;
  status.textContent = t("records.loading");
  try {
    const q = new URLSearchParams({ limit: String(PAGE), tz: String(-new Date().getTimezoneOffset()) });
    if (before) q.set("before", before);
    const res = await getJSON(`/api/bets?${q}`, { token: g.token });
    rows = rows.concat(res.bets || []);
    tipRows = tipRows.concat(res.tips || []);  // each page: the tips of its span of time
    for (const [day, sum] of Object.entries(res.days || {})) dayTotals.set(day, sum);
    for (const [round, sum] of Object.entries(res.rounds || {})) roundTotals.set(round, sum);
    next = res.next || null;
    status.textContent = rows.length || tipRows.length ? "" : t("records.empty");
  } catch (e) {
    status.textContent = e.status === 401 || e.status === 403 ? t("records.no_player") : t("records.error");
    return false;
  } finally {
    loading = false;
  }
  renderAll();
  return true;
}

/** Load older pages until the first day of the filter is covered, then show the filter. */
async function applyFilter() {
  const { from } = range();
  let pages = 0;
  while (from !== null && next && pages < MAX_PAGES_FOR_FILTER) {
    const oldest = rows.length ? timeOf(rows[rows.length - 1]) : Infinity;
    if (oldest < from) break;
    if (!(await load(next))) break;
    pages += 1;
  }
  renderAll();
}

/** The filter's days as [from, to) in local epoch ms; null for an open end. */
function range() {
  const day = (value, plus = 0) => {
    if (!value) return null;
    const [y, m, d] = value.split("-").map(Number);
    return new Date(y, m - 1, d + plus).getTime();
  };
  return { from: day(parse($("#from").value)), to: day(parse($("#to").value), 1) };
}

const timeOf = (b) => b.settled_at || b.placed_at;

function dayKey(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`;
}

function dayLabel(key) {
  const [y, m, d] = key.split("-").map(Number);
  const loc = lang() === "en" ? "en-GB" : lang() === "th" ? "th-TH" : "hi-IN";
  return new Date(y, m - 1, d).toLocaleDateString(loc, { weekday: "short", year: "numeric", month: "short", day: "numeric" });
}

const withholdingOf = (b) => b.deducted - b.amount;  // the server's deducted, less the bet
const isSettled = (b) => b.state !== "accepted";
const netOf = (b) => b.net ?? (isSettled(b) && b.returned !== null && b.returned !== undefined ? b.returned - b.deducted : null);

function totals(list) {
  const settled = list.filter(isSettled);
  return {
    bets: list.length,
    deducted: list.reduce((a, b) => a + b.deducted, 0),
    returned: settled.reduce((a, b) => a + (b.returned || 0), 0),
    net: settled.reduce((a, b) => a + (netOf(b) || 0), 0),
    open: list.length - settled.length,
  };
}

/** The shown rows: by day (newest first), each day by round (in the order met). */
function grouped() {
  const { from, to } = range();
  const days = new Map();
  for (const b of rows) {
    const at = timeOf(b);
    if ((from !== null && at < from) || (to !== null && at >= to)) continue;
    const key = dayKey(at);
    if (!days.has(key)) days.set(key, new Map());
    const byRound = days.get(key);
    if (!byRound.has(b.round_id)) byRound.set(b.round_id, []);
    byRound.get(b.round_id).push(b);
  }
  return days;
}

function renderPlayer() {
  const g = player();  // the launched session of this tab first, as load reads it
  $("#records-player").replaceChildren(...(g && g.player
    ? tName("records.player", g.player.name || g.player.id) : []));
}

function renderAll() {
  renderPlayer();  // in the language of the moment (renderAll follows a language switch)
  const body = [];
  const days = grouped();
  const tipDays = tipsByDay(tipRows, range(), dayKey);
  for (const key of [...new Set([...days.keys(), ...tipDays.keys()])].sort().reverse()) {
    const byRound = days.get(key) || new Map();
    const all = [...byRound.values()].flat();
    const sum = dayTotals.get(key) || totals(all);
    const sums = all.length || dayTotals.has(key) ? t("records.day_total", {
      bets: sum.bets, deducted: money(sum.deducted), returned: money(sum.returned), net: signed(sum.net) }) : "";
    body.push(h("tbody", { class: "records__day" }, h("tr", {
      class: "day-total", "data-testid": "day-total", "data-date": key, "data-bets": String(sum.bets),
      "data-deducted": String(sum.deducted), "data-returned": String(sum.returned), "data-net": String(sum.net),
    }, h("th", { colspan: "9", scope: "rowgroup" },
      h("span", { class: "day-total__date", text: dayLabel(key) }), " ",
      h("span", { class: "day-total__sums", text: sums })))));
    for (const [roundId, list] of byRound) body.push(roundGroup(roundId, list));
    if (tipDays.has(key)) body.push(tipsBody(tipDays.get(key), { launched }));
  }
  const table = $("#records");
  for (const old of table.querySelectorAll("tbody")) old.remove();
  table.append(...body);
  $("#more").hidden = !next;
  if (rows.length || tipRows.length) {
    $("#records-status").textContent = days.size || tipDays.size ? "" : t("records.no_match");
  }
}

function roundGroup(roundId, list) {
  const first = list[0];
  const sum = roundTotals.get(roundId) || totals(list);
  const cards = h("div", { class: "round-cards", "data-testid": "round-cards" });
  const head = h("tr", { class: "round-head", "data-testid": "record-round", "data-round-id": roundId },
    h("th", { colspan: "9", scope: "rowgroup" },
      h("div", { class: "round-head__line" },
        h("span", { class: "round-head__game" }, `${t("records.game")} `,
          h("strong", { "data-testid": "game-id", text: roundId })),
        h("span", { class: "muted", text: `${first.table} · ${t("records.round_no", { n: first.round_no })}` }),
        h("span", { class: "muted", text: dateTime(timeOf(first)) }),
        verifyLink(first.shoe_id),
        h("span", { class: "round-head__total", "data-testid": "round-total", "data-deducted": String(sum.deducted),
          "data-returned": String(sum.returned), "data-net": String(sum.net),
          text: sum.open === sum.bets
            ? t("records.round_total_open", { deducted: money(sum.deducted) })
            : t("records.round_total", { deducted: money(sum.deducted), returned: money(sum.returned), net: signed(sum.net) }) })),
      cards));
  fillRoundCards(roundId, cards, list);
  return h("tbody", { class: "records__round", "data-round-id": roundId }, head, ...list.map(row));
}

async function fillRoundCards(roundId, box, list) {
  let view = rounds.get(roundId);
  if (view === undefined) {
    if (list.every((b) => !isSettled(b))) view = "open";
    else {
      view = getJSON(`/api/rounds/${encodeURIComponent(roundId)}`).catch((e) => (e.status === 404 ? "open" : "error"));
      rounds.set(roundId, view);
    }
  }
  box.textContent = t("records.loading");
  view = await view;
  rounds.set(roundId, view);
  if (view === "open") { box.textContent = t("records.round_open"); return; }
  if (view === "error") { box.textContent = t("records.error"); return; }
  box.replaceChildren(...roundHands(view));
  if (view.state === "cancelled") {
    box.append(h("div", { class: "small", text: t("banner.cancelled", { reason: view.reason || "—" }) }));
  }
}

function handCell(cards) {
  if (!cards || cards.length !== 2) return h("span", { class: "muted", text: "—" });
  const e = evaluate(cards[0], cards[1]);
  return h("span", { class: "hand-cell" },
    h("span", { class: "cards-inline" }, ...cards.map((c) => cardEl(c, { small: true }))),
    h("span", { class: "small", "data-testid": "record-value", "data-value": e ? e.value : "",
      text: e ? handLabel(e.value) : "" }),
    // what makes a 2:1 (a special pattern): said on the hand, as on the felt
    e && e.flush ? h("span", { class: "tag tag--flush", "data-testid": "record-tag", "data-tag": "flush", text: t("tag.flush") }) : null,
    e && e.pair ? h("span", { class: "tag tag--pair", "data-testid": "record-tag", "data-tag": "pair", text: t("tag.pair") }) : null);
}

function td(labelKey, content, cls) {
  return h("td", { "data-label": t(labelKey), class: cls || null }, content);
}

function row(b) {
  const settled = isSettled(b);
  const outcome = b.state === "refunded" ? "refund" : b.outcome;
  let result;
  if (!settled) result = h("span", { class: "outcome", text: t("records.open") });
  else {
    // Odds worth showing: a Player bet's 1:1 / 2:1 either way, a Pair bet's 11:1 when it wins.
    const pairLost = isPairSpot(b.spot) && outcome !== "win";
    const odds = b.odds && outcome !== "refund" && outcome !== "tie" && !pairLost ? ` ${b.odds}:1` : "";
    result = h("span", { class: `outcome outcome--${outcome}`, "data-testid": "record-outcome",
      "data-outcome": outcome || "" }, `${t(`outcome.${outcome}`)}${odds}`);
  }
  const net = netOf(b);
  const withholding = withholdingOf(b);
  return h("tr", { "data-testid": "bet-row", "data-bet-id": b.bet_id, "data-state": b.state,
    "data-amount": String(b.amount), "data-withholding": String(withholding), "data-deducted": String(b.deducted),
    "data-returned": b.returned ?? "", "data-net": net ?? "", "data-balance-after": b.balance_after ?? "" },
  td("records.bet_id", h("code", { class: "bet-id", "data-testid": "bet-id", text: b.bet_id })),
  td("records.bet", spotName(b.spot)),
  td("records.amount", money(b.amount), "num"),
  td("records.withholding", h("span", { "data-testid": "record-withholding", "data-value": String(withholding),
    text: money(withholding) }), "num"),
  td("records.deducted", h("span", { "data-testid": "record-deducted",
    text: t("records.deducted_sum", { amount: money(b.amount), withholding: money(withholding), deducted: money(b.deducted) }) }), "num"),
  td("records.result", result),
  td("records.returned", settled ? money(b.returned) : "—", "num"),
  td("records.net", net === null ? "—" : h("span", { class: net > 0 ? "pos" : net < 0 ? "neg" : "", text: signed(net) }), "num"),
  launched ? null
    : td("records.balance_after", b.balance_after === null || b.balance_after === undefined ? "—" : money(b.balance_after), "num"));
}

/** The six hands of a round, with each Player position's result. */
function roundHands(r) {
  let hands = [];
  if (Array.isArray(r.hands)) hands = r.hands.map((x) => [x.hand, x.cards]);
  else if (r.hands && typeof r.hands === "object") hands = Object.entries(r.hands).map(([k, v]) => [k, Array.isArray(v) ? v : v.cards]);
  else if (r.cards && typeof r.cards === "object" && !Array.isArray(r.cards)) hands = Object.entries(r.cards);
  const results = Object.fromEntries((r.results || []).map((x) => [x.hand, x]));
  if (r.spots && typeof r.spots === "object") {
    for (const [spot, v] of Object.entries(r.spots)) {
      if (v && !spot.endsWith("_PAIR")) results[spot] = { outcome: v.outcome, odds: v.odds };
    }
  }
  hands.sort((a, b) => HANDS.indexOf(a[0]) - HANDS.indexOf(b[0]));
  return hands.filter(([hand]) => HANDS.includes(hand)).map(([hand, cards]) => {
    const res = results[hand];
    const odds = res && res.odds > 1 && res.outcome !== "tie" ? ` ${res.odds}:1` : "";
    return h("div", { class: "small round-hand", "data-testid": "round-hand", "data-hand": hand },
      h("div", { text: spotName(hand) + (res ? ` — ${t(`result.${res.outcome}`)}${odds}` : "") }),
      handCell(cards));
  });
}

main();
