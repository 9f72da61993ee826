// The rules page, in the project's own words, built from the i18n dictionaries so that it
// follows the language switch like every other page. Hand values in the examples come
// from cards.js, the same evaluator the Bet Record uses.

import { t, onLangChange } from "./i18n.js";
import { $, h, handLabel, spotName, initPage } from "./common.js";
import { evaluate, cardEl } from "./cards.js";
import { roadmapLegend } from "./roadmap.js";

const COMBOS = [
  ["7.5", ["AD", "KD"], ["AS", "KS"]],
  ["7.4", ["AS", "AC"], ["5H", "5D"], ["6S", "6H"], ["10C", "10D"]],
  ["7.3", ["JS", "JH"], ["QD", "KH"], ["KD", "KC"]],
  ["7.2", ["10H", "JH"], ["10C", "QH"], ["10S", "KH"]],
  ["7.1", ["AD", "9D"], ["2H", "8H"], ["3C", "7C"], ["4D", "6D"]],
];

// [key, banker cards, player cards, spot, amount, returned]
const EXAMPLES = [
  ["ex1", ["4H", "8C"], ["6C", "7S"], "P1", 100, 300],
  ["ex2", ["QC", "10C"], ["QC", "JC"], "P1", 100, 400],
  ["ex3", ["2H", "4H"], ["5C", "5C"], "P1", 100, 300],
  ["ex4", ["9D", "7C"], ["KH", "9H"], "P1", 100, 400],
  ["ex5", ["8C", "JC"], ["9D", "6C"], "P1", 100, 0],
  ["ex6", ["6S", "8S"], ["10C", "10H"], "P1_PAIR", 100, 1200],
];

const cards = (list) => h("span", { class: "cards-inline" }, ...list.map((c) => cardEl(c, { small: true })));
const p = (key, params) => h("p", { text: t(key, params) });
const section = (id, key, ...body) => h("section", { id, "aria-labelledby": `${id}-h` },
  h("h2", { id: `${id}-h`, text: t(key) }), ...body);

function render() {
  const main = $("#main");
  const order = ["9", "8", "7.5", "7.4", "7.3", "7.2", "7.1", "7", "6", "5", "4", "3", "2", "1", "0"];
  main.replaceChildren(
    h("h1", { text: t("rules.title") }),
    section("intro", "rules.intro.h", p("rules.intro.p1"), p("rules.intro.p2")),
    section("bets", "rules.bets.h", p("rules.bets.p1"), p("rules.bets.p2")),
    section("flow", "rules.flow.h", p("rules.flow.p1"), p("rules.flow.p2")),
    section("points", "rules.points.h", p("rules.points.p1"), p("rules.points.p2")),
    section("combos", "rules.combos.h", p("rules.combos.p"),
      h("table", {},
        h("thead", {}, h("tr", {},
          h("th", { scope: "col", text: t("rules.col.value") }),
          h("th", { scope: "col", text: t("rules.col.name") }),
          h("th", { scope: "col", text: t("rules.col.what") }),
          h("th", { scope: "col", text: t("rules.col.examples") }))),
        h("tbody", {}, ...COMBOS.map(([v, ...ex]) => h("tr", {},
          h("td", { text: v }),
          h("td", { text: t(`combo.${v}`) }),
          h("td", { text: t(`rules.combo.${v}`) }),
          h("td", {}, ...ex.map((pairOf) => cards(pairOf))))))),
      p("rules.order", { order: order.map((v) => (v.includes(".") ? t(`combo.${v}`) : v)).join(" > ") }),
      p("rules.tie")),
    section("special", "rules.special.h", p("rules.special.p")),
    section("pay", "rules.pay.h", p("rules.pay.p1"),
      h("table", {},
        h("thead", {}, h("tr", {},
          h("th", { scope: "col", text: t("rules.col.result") }),
          h("th", { scope: "col", text: t("rules.col.odds") }),
          h("th", { scope: "col", text: t("rules.col.returned") }))),
        h("tbody", {}, ...[
          ["rules.pay.win", "1:1", 300], ["rules.pay.win_special", "2:1", 400],
          ["rules.pay.win_special_06", "1:1", 300], ["rules.pay.win_strong", "2:1", 400],
          ["rules.pay.tie", "—", 200], ["rules.pay.lose", "1:1", 100], ["rules.pay.lose_special", "2:1", 0],
        ].map(([k, odds, ret]) => h("tr", {}, h("td", { text: t(k) }), h("td", { text: odds }),
          h("td", { text: String(ret) }))))),
      p("rules.pay.p2")),
    section("pair", "rules.pair.h", p("rules.pair.p1")),
    section("examples", "rules.examples.h", ...EXAMPLES.map(example)),
    section("shoe", "rules.shoe.h", p("rules.shoe.p1"), p("rules.shoe.p2"), p("rules.shoe.p3")),
    section("roadmap", "roadmap.title", p("rules.roadmap.p"), roadmapLegend()),
    section("disconnect", "rules.disconnect.h", p("rules.disconnect.p")),
    section("errors", "rules.errors.h", p("rules.errors.p")),
    section("rtp", "rules.rtp.h", p("rules.rtp.p")),
    h("p", { class: "note", text: t("rules.prevail") }),
  );
}

function example([key, banker, player, spot, amount, returned]) {
  const b = evaluate(banker[0], banker[1]);
  const pl = evaluate(player[0], player[1]);
  const deducted = spot.endsWith("_PAIR") ? amount : 2 * amount;
  return h("div", { class: "example" },
    h("h3", { text: t(`rules.${key}.h`) }),
    h("p", {}, `${t("hand.banker")}: `, cards(banker), ` ${handLabel(b.value)} · ${spotName(spot.slice(0, 2))}: `,
      cards(player), ` ${handLabel(pl.value)}`),
    h("p", { text: t("rules.example.bet", { spot: spotName(spot), amount, deducted, returned }) }),
    h("p", { text: t(`rules.${key}.p`) }));
}

initPage({ active: "rules" });
render();
onLangChange(render);
