// An operator's session, as this tab keeps it (sessionStorage: per tab, gone with it):
// - the token's claims (currency, name), read without a round trip;
// - the session's limits in its currency (welcome.player.limits), for the rules page,
//   which has no connection of its own;
// - its end: why, and where the operator wants the player sent back (return_url, a launch
//   field carried in the launch URL's fragment). A reload after the end shows the end
//   again instead of quietly making the player a demo viewer.

import { t } from "./i18n.js";
import { h } from "./common.js";

const LIMITS_KEY = "livetable.session.limits";
const ENDED_KEY = "livetable.session.ended";
const RETURN_KEY = "livetable.session.return";

// Reasons the page says in the player's language; any other reason (the operator's own
// word) gets the general sentence, never the raw code.
const KNOWN_REASONS = new Set(["time_limit", "self_exclusion", "operator", "token_expired",
  "account_closed", "loss_limit"]);

function get(key) { try { return sessionStorage.getItem(key); } catch { return null; } }
function put(key, value) {
  try { if (value === null) sessionStorage.removeItem(key); else sessionStorage.setItem(key, value); }
  catch { /* storage off: nothing kept */ }
}

/** The claims of a signed token (its first part, base64url JSON), or null. */
export function claimsOf(token) {
  try {
    const bytes = Uint8Array.from(atob(token.split(".")[0].replace(/-/g, "+").replace(/_/g, "/")),
      (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch { return null; }
}

/** A new launch in this tab: keep what its fragment carried besides the token (its
 *  return_url), and forget the end of an earlier session. */
export function keepLaunch(hash) {
  const back = hash.get("return");
  put(RETURN_KEY, back && /^https?:\/\//i.test(back) ? back : null);
  put(ENDED_KEY, null);
}

export function returnUrl() { return get(RETURN_KEY); }

export function keepLimits(player) {
  if (player && player.currency) {
    put(LIMITS_KEY, JSON.stringify({ currency: player.currency, limits: player.limits || null }));
  }
}

/** {currency, limits|null} of this tab's operator session, or null. */
export function keptLimits() {
  try { return JSON.parse(get(LIMITS_KEY) || "null"); } catch { return null; }
}

export function rememberEnd(reason) { put(ENDED_KEY, JSON.stringify({ reason: reason || "" })); }

/** The kept end of this tab's session ({reason}), or null. */
export function keptEnd() {
  try { return JSON.parse(get(ENDED_KEY) || "null"); } catch { return null; }
}

/** The ended session's sentence, in the page's language. */
export function endedText(reason) {
  return KNOWN_REASONS.has(reason) ? t(`session.ended.${reason}`) : t("session.ended");
}

/** Fill `banner` with the end: the reason, and a button back to the operator's site. */
export function showEnded(banner, reason) {
  const back = returnUrl();
  banner.replaceChildren(h("span", { "data-testid": "session-ended-text", text: endedText(reason) }),
    back ? h("a", { class: "btn btn--primary session-return", href: back, "data-testid": "session-return",
      text: t("session.return") }) : null);
  banner.hidden = false;
  document.body.dataset.sessionEnded = reason || "ended";
}
