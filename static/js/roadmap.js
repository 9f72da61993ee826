// The roadmap: one row per Player position, one cell per round of the current shoe, with
// the seed's symbols — blue circle Player wins, grey circle Player loses, green circle tie,
// an outer ring for a flush, a yellow dot for a pair.

import { t } from "./i18n.js";
import { h, spotName } from "./common.js";
import { POSITIONS } from "./state.js";

function cellLabel(roundNo, pos, r) {
  const parts = [t("roadmap.round", { n: roundNo }), spotName(pos), t(`outcome.${r.outcome}`)];
  if (r.odds === 2 && r.outcome !== "tie") parts.push("2:1");
  if (r.flush) parts.push(t("roadmap.flush"));
  if (r.pair) parts.push(t("roadmap.pair"));
  return parts.join(", ");
}

export function roadmapCell(r, label) {
  const cell = h("span", {
    class: `rm rm--${r.outcome}${r.flush ? " rm--flush" : ""}`,
    "data-testid": "rm-cell",
    "data-outcome": r.outcome,
    "data-flush": r.flush ? "1" : "0",
    "data-pair": r.pair ? "1" : "0",
    role: label ? "img" : null,
    "aria-label": label || null,
    title: label || null,
  });
  if (r.pair) cell.append(h("span", { class: "rm__pair", "aria-hidden": "true" }));
  return cell;
}

/**
 * Render the roadmap into `container`.
 * @param {Array} roadmap RoadmapEntry list (sorted by round_no)
 * @param {{limit?: number, compact?: boolean}} opts
 */
export function renderRoadmap(container, roadmap, { limit = 0, compact = false } = {}) {
  const entries = limit ? roadmap.slice(-limit) : roadmap;
  if (!entries.length && !compact) {
    container.replaceChildren(h("p", { class: "roadmap__empty", text: t("roadmap.empty") }));
    return null;
  }
  const grid = h("div", { class: "roadmap" + (compact ? " roadmap--compact" : ""), role: "table",
    "aria-label": t("roadmap.title") });
  for (const pos of POSITIONS) {
    const row = h("div", { class: "roadmap__row", role: "row", "data-testid": `roadmap-${pos}` },
      h("span", { class: "roadmap__pos", role: "rowheader", title: spotName(pos) }, pos));
    const cells = h("span", { class: "roadmap__cells", role: "cell" });
    for (const e of entries) {
      const r = (e.results || []).find((x) => x.hand === pos);
      if (!r) { cells.append(h("span", { class: "rm rm--none", "aria-hidden": "true" })); continue; }
      cells.append(roadmapCell(r, cellLabel(e.round_no, pos, r)));
    }
    row.append(cells);
    grid.append(row);
  }
  container.replaceChildren(grid);
  // Newest rounds on the right: keep them in view.
  for (const c of grid.querySelectorAll(".roadmap__cells")) c.scrollLeft = c.scrollWidth;
  return grid;
}

export function roadmapLegend() {
  const item = (r, key) => h("li", {}, roadmapCell(r, null), h("span", { "data-i18n": key, text: t(key) }));
  return h("ul", { class: "legend", "aria-label": t("roadmap.legend"), "data-i18n-aria": "roadmap.legend" },
    item({ outcome: "win" }, "legend.win"),
    item({ outcome: "lose" }, "legend.lose"),
    item({ outcome: "tie" }, "legend.tie"),
    item({ outcome: "legend", flush: true }, "legend.flush"),
    item({ outcome: "legend", pair: true }, "legend.pair"),
  );
}
