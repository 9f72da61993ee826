// The roadmap: one row per Player position, one column per round of the current shoe
// (numbered), each row with its win/lose/tie counts, with the seed's symbols — blue circle Player wins, grey circle Player loses, green circle tie,
// an outer ring for a flush, a yellow dot for a pair.

import { t } from "./i18n.js";
import { h, spotName } from "./common.js";
import { POSITIONS } from "./state.js";

function cellLabel(roundNo, pos, r) {
  const parts = [t("roadmap.round", { n: roundNo }), spotName(pos), t(`outcome.${r.outcome}`)];
  if (r.odds > 1 && r.outcome !== "tie") parts.push(`${r.odds}:1`);
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
 * Render the roadmap into `container`: one grid, one horizontal scroll for all five rows
 * (a phone scrolls the whole roadmap, never one row on its own), the position names and
 * their win/lose/tie counts held at the left edge, the round number over each column.
 * @param {Array} roadmap RoadmapEntry list (sorted by round_no)
 * @param {{limit?: number, compact?: boolean}} opts  compact: the lobby's small one (no
 *   round numbers, no counts)
 */
export function renderRoadmap(container, roadmap, { limit = 0, compact = false } = {}) {
  const entries = limit ? roadmap.slice(-limit) : roadmap;
  if (!entries.length) {  // no rounds yet: a sentence, not five labels over nothing
    container.replaceChildren(h("p", { class: "roadmap__empty", "data-testid": "roadmap-empty", text: t("roadmap.empty") }));
    return null;
  }
  const grid = h("div", { class: "roadmap__grid", role: "table", "aria-label": t("roadmap.title") });
  grid.style.setProperty("--rm-cols", String(Math.max(entries.length, 1)));
  if (!compact) {
    const head = h("div", { class: "roadmap__row roadmap__row--head", role: "row" },
      h("span", { class: "roadmap__pos", role: "columnheader", text: t("roadmap.position") }));
    for (const e of entries) {
      head.append(h("span", { class: "roadmap__round", role: "columnheader", "data-testid": "rm-round",
        title: t("roadmap.round", { n: e.round_no }), text: String(e.round_no) }));
    }
    grid.append(head);
  }
  for (const pos of POSITIONS) {
    const tally = { win: 0, lose: 0, tie: 0 };
    const cells = entries.map((e) => {
      const r = (e.results || []).find((x) => x.hand === pos);
      if (!r) return h("span", { class: "roadmap__cell", role: "cell" }, h("span", { class: "rm rm--none", "aria-hidden": "true" }));
      if (r.outcome in tally) tally[r.outcome] += 1;
      return h("span", { class: "roadmap__cell", role: "cell" }, roadmapCell(r, cellLabel(e.round_no, pos, r)));
    });
    const name = h("span", { class: "roadmap__pos", role: "rowheader", title: spotName(pos) }, pos);
    if (!compact) {
      name.append(h("span", {
        class: "roadmap__tally", "data-testid": `rm-count-${pos}`, "data-win": String(tally.win),
        "data-lose": String(tally.lose), "data-tie": String(tally.tie),
        "aria-label": t("roadmap.tally", tally), title: t("roadmap.tally", tally),
      },
      h("span", { class: "tally tally--win", text: String(tally.win) }),
      h("span", { class: "tally tally--lose", text: String(tally.lose) }),
      h("span", { class: "tally tally--tie", text: String(tally.tie) })));
    }
    grid.append(h("div", { class: "roadmap__row", role: "row", "data-testid": `roadmap-${pos}` }, name, ...cells));
  }
  const scroller = h("div", { class: "roadmap__scroll", tabindex: "0" }, grid);
  const box = h("div", { class: "roadmap" + (compact ? " roadmap--compact" : "") }, scroller);
  container.replaceChildren(box);
  // Newest rounds on the right: keep them in view.
  scroller.scrollLeft = scroller.scrollWidth;
  return box;
}

export function roadmapLegend() {
  const item = (r, key) => h("li", {}, roadmapCell(r, null), h("span", { "data-i18n": key, text: t(key) }));
  return h("ul", { class: "legend", "aria-label": t("roadmap.legend"), "data-i18n-aria": "roadmap.legend" },
    item({ outcome: "win" }, "legend.win"),
    item({ outcome: "lose" }, "legend.lose"),
    item({ outcome: "tie" }, "legend.tie"),
    item({ outcome: "legend", flush: true }, "legend.flush"),
    item({ outcome: "legend", pair: true }, "legend.pair"),
    h("li", {}, h("span", { class: "roadmap__tally", "aria-hidden": "true" },
      h("span", { class: "tally tally--win", text: "#" }), h("span", { class: "tally tally--lose", text: "#" }),
      h("span", { class: "tally tally--tie", text: "#" })),
    h("span", { "data-i18n": "legend.tally", text: t("legend.tally") })),
  );
}
