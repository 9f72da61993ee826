// History without leaving the table: a strip of the last 20 results of each position (from
// the table's roadmap, which the snapshot and round_settled keep), over the table's top
// right corner — the video's, when there is one; and the player's own bets of this shoe in
// the "Roadmap & stats" panel (from the Bet Record, GET /api/bets, read only while the
// panel is on screen: a table of thousands of players would otherwise ask for every one
// of them after every round).

import { t, lang, onLangChange } from "./i18n.js";
import { $, h, signed, money, spotName } from "./common.js";
import { getJSON } from "./api.js";
import { POSITIONS } from "./state.js";

export const STRIP_ROUNDS = 20;
const RECORD_PAGE = 200;   // the Bet Record's largest page: a shoe's bets of one player fit
const AFTER_SETTLED_MS = 1500;

let opts = null;           // {token(), shoeId(), tableId()}
let lastRoadmap = [];
let visible = false;       // the panel's bets section is on screen
let loadedFor = null;      // the shoe and round the list was read for
let timer = null;

/** Mount the strip on `wrap` (the felt's wrapper) and the list in `panel`. */
export function mountHistory(conn, wrap, panel, options) {
  opts = options;
  wrap.append(h("div", { class: "history-strip", id: "history-strip", "data-testid": "history-strip",
    role: "img", hidden: true }));
  panel.append(h("section", { class: "mybets", id: "mybets", "data-testid": "mybets" },
    h("h3", { class: "stats__title", "data-i18n": "mybets.title", text: t("mybets.title") }),
    h("p", { class: "mybets__total", id: "mybets-total", "data-testid": "mybets-total" }),
    h("ol", { class: "mybets__list", id: "mybets-list", "data-testid": "mybets-list" })));
  new IntersectionObserver((entries) => {
    visible = entries.some((e) => e.isIntersecting);
    if (visible) loadBets();
  }).observe($("#mybets"));
  conn.addEventListener("event", (e) => {
    if (e.detail.type === "round_settled" && visible) {
      clearTimeout(timer);
      timer = setTimeout(() => loadBets(true), AFTER_SETTLED_MS);  // once the Bet Record has it
    }
  });
  onLangChange(() => { renderStrip(lastRoadmap); loadedFor = null; if (visible) loadBets(); });
}

/** Draw the strip from the table's roadmap (table.js calls it on every render). */
export function renderStrip(roadmap) {
  lastRoadmap = roadmap || [];
  const strip = $("#history-strip");
  if (!strip) return;
  const rounds = lastRoadmap.slice(-STRIP_ROUNDS);
  strip.hidden = !rounds.length;
  const sig = rounds.map((r) => r.round_id).join() + lang();
  if (strip.dataset.sig === sig) return;
  strip.dataset.sig = sig;
  strip.dataset.rounds = String(rounds.length);
  const summary = [];
  const rows = POSITIONS.map((pos) => {
    const counts = { win: 0, lose: 0, tie: 0 };
    const cells = rounds.map((r) => {
      const res = (r.results || []).find((x) => x.hand === pos);
      const outcome = res ? res.outcome : "none";
      if (outcome in counts) counts[outcome] += 1;
      const word = outcome in counts ? t(`result.${outcome}`) : "—";
      return h("i", { class: `dot dot--${outcome}`, title: `#${r.round_no} ${spotName(pos)}: ${word}` });
    });
    summary.push(t("history.row", { hand: spotName(pos), win: counts.win, lose: counts.lose, tie: counts.tie }));
    return h("div", { class: "history-strip__row", "data-testid": `history-${pos}` },
      h("b", { text: pos }), ...cells);
  });
  strip.setAttribute("aria-label", `${t("history.title", { n: rounds.length })}: ${summary.join("; ")}`);
  strip.replaceChildren(...rows);
}

async function loadBets(force = false) {
  const token = opts.token();
  const shoe = opts.shoeId();
  const key = `${shoe}|${lastRoadmap.length}`;
  if (!token || !shoe || (!force && loadedFor === key)) { if (!token || !shoe) showBets([]); return; }
  loadedFor = key;
  try {
    const res = await getJSON(`/api/bets?limit=${RECORD_PAGE}`, { token });
    showBets((res.bets || []).filter((b) => b.shoe_id === shoe && b.table === opts.tableId()));
  } catch {
    loadedFor = null;  // asked again when next on screen
  }
}

function showBets(list) {
  const ol = $("#mybets-list");
  const total = $("#mybets-total");
  if (!list.length) {
    ol.replaceChildren();
    total.textContent = t("mybets.empty");
    total.dataset.count = "0";
    return;
  }
  const settled = list.filter((b) => typeof b.net === "number");
  const staked = list.reduce((a, b) => a + b.amount, 0);
  const net = settled.reduce((a, b) => a + b.net, 0);
  total.dataset.count = String(list.length);
  total.dataset.net = String(net);
  total.textContent = t("mybets.total", { n: list.length, staked: money(staked), net: signed(net) });
  ol.replaceChildren(...list.map((b) => h("li", { "data-bet": b.bet_id },
    h("span", { class: "muted", text: t("mybets.round", { n: b.round_no }) }),
    h("span", { text: `${spotName(b.spot)} ${money(b.amount)}` }),
    h("span", { class: `mybets__outcome mybets__outcome--${b.outcome || "open"}`,
      text: b.outcome ? `${t(`outcome.${b.outcome}`)} ${signed(b.net)}` : t("mybets.open") }))));
}
