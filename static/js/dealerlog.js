// The dealer console's words and its log: a command's name and a card's slot in the
// page's language, a table event described in one line, and the log (newest first, the
// last 300 lines).

import { t } from "./i18n.js";
import { $, h, timeOfDay, spotName, handLabel } from "./common.js";

const LOG_MAX = 300;

export function cmdName(cmd) {
  const key = `cmd.${cmd}`;
  const v = t(key);
  return v === key ? cmd : v;
}

export function slotName(slot) {
  if (!slot) return "?";
  const s = String(slot);
  if (s.toLowerCase() === "burn") return t("dealer.slot_burn");
  if (/^P[1-5]$/.test(s) || s === "BANKER") return spotName(s);
  const key = `dealer.slot_${s.toLowerCase()}`;
  const v = t(key);
  return v === key ? s : v;
}

export function describe(ev) {
  switch (ev.type) {
    case "shoe_started": return t("dealer.ev_shoe", { card: ev.burn_card || "—", n: ev.burned });
    case "round_opened": return t("dealer.ev_opened", { n: ev.round_no });
    case "betting_closed": return t("phase.dealing");
    case "card_dealt": return t("dealer.ev_dealt", { slot: slotName(ev.to), n: ev.n });
    case "hand_revealed": return `${spotName(ev.hand)}: ${ev.cards.join(" ")} — ${handLabel(ev.value)}`;
    case "round_settled": return t("dealer.ev_settled") + " " + (ev.results || []).map((r) => `${spotName(r.hand)} ${t(`result.${r.outcome}`)}${r.odds > 1 && r.outcome !== "tie" ? ` ${r.odds}:1` : ""}`).join(", ");
    case "round_cancelled": return t("banner.cancelled", { reason: ev.reason || "—" });
    case "cards_voided": return t("dealer.ev_voided", { n: ev.count, dealer: ev.dealer, supervisor: ev.supervisor });
    case "shoe_shuffling": return t("banner.new_shoe");
    case "table_paused": return t("banner.paused", { reason: ev.reason || "—" });
    case "table_resumed": return t("announce.resumed");
    case "cut_card_out": return t("dealer.cut_out");
    case "mode_changed": return `${cmdName("set_mode")}: ${t(`mode.${ev.mode}`)}`;
    default: return ev.type;
  }
}

export function log(kind, text) {
  const list = $("#log");
  const now = new Date();
  list.prepend(h("li", { class: `log--${kind}`, "data-kind": kind },
    h("time", { datetime: now.toISOString(), text: timeOfDay(now) }), text));
  while (list.children.length > LOG_MAX) list.lastChild.remove();
}
