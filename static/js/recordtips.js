// The Bet Record's tips to the dealer (GET /api/bets' `tips`: docs/protocol.md §6, bets):
// apart from the bets, whose entries and totals keep their meaning. Each day with tips gets
// a group of its own after its rounds, in the bets' columns — the tip id, "Tip to the
// dealer", the amount (all of it deducted, nothing withheld, nothing returned), net minus
// the amount and the balance after — with the day's tips counted in its head.

import { t } from "./i18n.js";
import { h, money, signed, dateTime } from "./common.js";

/** The tips of `list` in the days of `range` ({from, to}: local epoch ms or null), by day. */
export function tipsByDay(list, { from, to }, dayKey) {
  const days = new Map();
  for (const tip of list) {
    if ((from !== null && tip.placed_at < from) || (to !== null && tip.placed_at >= to)) continue;
    const key = dayKey(tip.placed_at);
    if (!days.has(key)) days.set(key, []);
    days.get(key).push(tip);
  }
  return days;
}

/** A day's tips: a head with their count and sum, then one row each. */
export function tipsBody(list, { launched }) {
  const sum = list.reduce((a, tip) => a + tip.amount, 0);
  const cell = (key, content, cls) => h("td", { "data-label": t(key), class: cls || null }, content);
  const head = h("tr", { class: "round-head tips-head", "data-testid": "record-tips" },
    h("th", { colspan: "9", scope: "rowgroup" },
      h("div", { class: "round-head__line" },
        h("strong", { text: t("records.tips") }),
        h("span", { class: "round-head__total", "data-testid": "tips-total", "data-amount": String(sum),
          text: t("records.tips_total", { n: list.length, amount: money(sum) }) }))));
  const rows = list.map((tip) => h("tr", { class: "tip-row", "data-testid": "tip-row", "data-tip-id": tip.tip_id,
    "data-amount": String(tip.amount), "data-balance-after": tip.balance_after ?? "" },
  cell("records.bet_id", h("code", { class: "bet-id", text: tip.tip_id })),
  cell("records.bet", h("span", {}, t("records.tip"), h("span", { class: "muted small",
    text: ` · ${tip.table} · ${dateTime(tip.placed_at)}` }))),
  cell("records.amount", money(tip.amount), "num"),
  cell("records.withholding", money(0), "num"),
  cell("records.deducted", money(tip.amount), "num"),
  cell("records.result", h("span", { class: "outcome outcome--tip", text: t("records.tip_given") })),
  cell("records.returned", "—", "num"),
  cell("records.net", h("span", { class: "neg", text: signed(-tip.amount) }), "num"),
  launched ? null : cell("records.balance_after",
    tip.balance_after === null || tip.balance_after === undefined ? "—" : money(tip.balance_after), "num")));
  return h("tbody", { class: "records__tips" }, head, ...rows);
}
