// The dealer console's card entry: a typed card checked with the server's own lenient
// grammar (cards.js) before it is sent, and the cut card, reported like a card.

import { t } from "./i18n.js";
import { $ } from "./common.js";
import { parseCard } from "./cards.js";

// The cut card, when it comes out of a physical shoe, is reported like a card.
const CUT_TOKENS = new Set(["CUT", "CUTCARD", "CUT_CARD"]);
export const isCut = (v) => CUT_TOKENS.has(v.trim().toUpperCase());

export function validateCard(showEmpty) {
  const input = $("#card");
  const v = input.value.trim();
  if (isCut(v) || /^C(U(T(_?(C(A(RD?)?)?)?)?)?)?$/i.test(v)) {
    input.removeAttribute("aria-invalid");
    $("#card-error").hidden = true;
    return isCut(v) ? { text: "CUT" } : null;
  }
  const err = $("#card-error");
  if (!v) {
    input.removeAttribute("aria-invalid");
    err.hidden = !showEmpty;
    err.textContent = showEmpty ? t("dealer.card_empty") : "";
    return null;
  }
  const card = parseCard(v);
  // While typing, "1" (of "10") or a bare rank is not yet wrong.
  const incomplete = /^(10?|[2-9AJQKT])$/i.test(v);
  if (!card && !incomplete) {
    input.setAttribute("aria-invalid", "true");
    err.hidden = false;
    err.textContent = t("dealer.card_invalid", { card: v });
  } else {
    input.removeAttribute("aria-invalid");
    err.hidden = true;
  }
  return card;
}
