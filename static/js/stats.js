// This shoe's statistics on the table: each position's wins, losses and ties, its pairs and
// flushes, and the Banker's Pok (8 or 9 points) and pairs. Counted from the roadmap the
// server sends (the snapshot's and round_settled's): nothing here is remembered by the page,
// so a reload or a second device shows the same numbers.

import { t } from "./i18n.js";
import { h, spotName } from "./common.js";
import { POSITIONS } from "./state.js";

/** Counts from a roadmap: per position {win, lose, tie, pair, flush}, and the Banker's. */
export function shoeStats(roadmap) {
  const per = Object.fromEntries(POSITIONS.map((p) => [p, { win: 0, lose: 0, tie: 0, pair: 0, flush: 0 }]));
  const banker = { pok: 0, pair: 0, known: 0 };
  for (const round of roadmap) {
    for (const r of round.results || []) {
      const c = per[r.hand];
      if (!c) continue;
      if (r.outcome in c) c[r.outcome] += 1;
      if (r.pair) c.pair += 1;
      if (r.flush) c.flush += 1;
    }
    if (round.banker) {  // absent from rounds an older server settled
      banker.known += 1;
      if (round.banker.points >= 8) banker.pok += 1;
      if (round.banker.pair) banker.pair += 1;
    }
  }
  return { rounds: roadmap.length, per, banker };
}

export function renderStats(container, roadmap) {
  const s = shoeStats(roadmap);
  const rounds = document.getElementById("stats-rounds");
  if (rounds) rounds.textContent = s.rounds ? t("stats.rounds", { n: s.rounds }) : "";
  if (!s.rounds) {
    container.replaceChildren(h("p", { class: "muted small", text: t("stats.empty") }));
    return;
  }
  const cols = ["win", "lose", "tie", "pair", "flush"];
  const head = h("tr", {}, h("th", { scope: "col", text: t("stats.position") }),
    ...cols.map((c) => h("th", { scope: "col", text: t(`stats.${c}`) })));
  const rows = POSITIONS.map((p) => h("tr", { "data-testid": `stats-${p}`,
    ...Object.fromEntries(cols.map((c) => [`data-${c}`, String(s.per[p][c])])) },
  h("th", { scope: "row", text: spotName(p) }),
  ...cols.map((c) => h("td", { text: String(s.per[p][c]) }))));
  const banker = h("p", { class: "stats__banker", "data-testid": "stats-banker",
    "data-pok": String(s.banker.pok), "data-pair": String(s.banker.pair) },
  h("span", {}, `${t("stats.banker_pok")}: `, h("strong", { text: String(s.banker.pok) })),
  h("span", {}, `${t("stats.banker_pair")}: `, h("strong", { text: String(s.banker.pair) })));
  container.replaceChildren(h("table", {}, h("thead", {}, head), h("tbody", {}, ...rows)), banker);
}
