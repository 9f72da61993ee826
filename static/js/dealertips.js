// Tips to the dealer, at the dealer console: each `tip_received` (sent to the table's dealer
// consoles only: docs/protocol.md §11) is shown as it comes — who, how much — with a
// running total for the shift, per currency (a table may have players of several
// operators). The shift is this browser tab's: it starts at the first tip after the console
// was opened or "New shift" was pressed, and survives a reload (sessionStorage).

import { t, onLangChange } from "./i18n.js";
import { h, moneyLocale, timeOfDay, announce } from "./common.js";
import { log } from "./dealerlog.js";

const SHIFT_KEY = "livetable.dealerTips";
const SHOWN = 8;

/** An amount of minor units in `currency` (none: a plain amount). */
export function tipMoney(amount, currency) {
  const locale = moneyLocale();
  if (!currency) return Number(amount).toLocaleString(locale);
  try {
    const format = new Intl.NumberFormat(locale, { style: "currency", currency });
    return format.format(amount / 10 ** format.resolvedOptions().maximumFractionDigits);
  } catch { return `${Number(amount).toLocaleString(locale)} ${currency}`; }
}

function readShift() {
  try {
    const kept = JSON.parse(sessionStorage.getItem(SHIFT_KEY) || "null");
    if (kept && Array.isArray(kept.tips) && kept.totals) return kept;
  } catch { /* a fresh shift */ }
  return { tips: [], totals: {}, count: 0 };
}

export function mountDealerTips(conn, box) {
  let shift = readShift();
  const total = h("p", { class: "dealer-tips__total", "data-testid": "dealer-tips-total", "aria-live": "polite" });
  const list = h("ol", { class: "dealer-tips__list", "data-testid": "dealer-tips-list", reversed: "" });
  const reset = h("button", { type: "button", class: "btn btn--small", "data-testid": "dealer-tips-new-shift",
    "data-i18n": "dealer.tips_new_shift", text: t("dealer.tips_new_shift") });
  box.replaceChildren(h("h2", { id: "tips-title", "data-i18n": "dealer.tips", text: t("dealer.tips") }),
    total, list, reset);

  function render() {
    const sums = Object.entries(shift.totals).map(([cur, n]) => tipMoney(n, cur === "-" ? null : cur));
    total.textContent = shift.count
      ? t("dealer.tips_total", { total: sums.join(" · "), n: shift.count })
      : t("dealer.tips_none");
    list.replaceChildren(...shift.tips.map((x) => h("li", {},
      h("time", { text: timeOfDay(new Date(x.at)) }), " ",
      t("dealer.tip_line", { name: x.from, amount: tipMoney(x.amount, x.currency) }))));
  }

  function keep() {
    try { sessionStorage.setItem(SHIFT_KEY, JSON.stringify(shift)); } catch { /* private mode */ }
  }

  reset.addEventListener("click", () => { shift = { tips: [], totals: {}, count: 0 }; keep(); render(); });
  conn.addEventListener("message", (e) => {
    const msg = e.detail;
    if (msg.type !== "tip_received") return;
    const cur = msg.currency || "-";
    shift.totals[cur] = (shift.totals[cur] || 0) + msg.amount;
    shift.count += 1;
    shift.tips = [{ from: msg.from, amount: msg.amount, currency: msg.currency, at: msg.at },
      ...shift.tips].slice(0, SHOWN);
    keep();
    render();
    const line = t("dealer.tip_line", { name: msg.from, amount: tipMoney(msg.amount, msg.currency) });
    log("tip", `♥ ${line}`);
    announce(line);
  });
  onLangChange(render);
  render();
}
