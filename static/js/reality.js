// The reality check's three ways on (an operator's session: docs/operator.md): "Keep
// playing" (the check's acknowledgement, reality_check_ack — table.js sends it), "View
// history" (the Bet Record, in a tab of its own: this table stays as it is, the check still
// holding betting), and "Quit" — back to the operator's site, its return_url, else this
// lobby.
//
// Where the return_url comes from: the launch gives it, optionally. It is read from the
// launch URL's fragment (beside the token: read here, before operator.js drops the
// fragment from the address bar), or from the welcome if the server sends it there, and
// kept for this tab like the session's token. Only an http(s) address is ever followed.

import { t } from "./i18n.js";
import { h } from "./common.js";

const RETURN_KEY = "livetable.return_url";
const LOBBY = "index.html";

keep(new URLSearchParams(location.hash.slice(1)).get("return_url"));

function keep(url) {
  if (!safe(url)) return;
  try { sessionStorage.setItem(RETURN_KEY, url); } catch { /* private mode: the lobby then */ }
}

function safe(url) {
  if (typeof url !== "string" || !url) return false;
  try { return ["http:", "https:"].includes(new URL(url, location.href).protocol); } catch { return false; }
}

/** Where "Quit" leads: the operator's return_url, else the lobby. */
export function quitUrl() {
  let kept = null;
  try { kept = sessionStorage.getItem(RETURN_KEY); } catch { /* private mode */ }
  return safe(kept) ? kept : LOBBY;
}

/** Add "View history" and "Quit" to the check's dialog `box`; learn a return_url from
 * `conn`'s welcome if it carries one (msg.return_url or msg.player.return_url). */
export function mountRealityCheck(conn, box) {
  conn.addEventListener("welcome", (e) => {
    const msg = e.detail.msg || {};
    keep(msg.return_url || (msg.player && msg.player.return_url) || null);
  });
  const history = h("button", { type: "button", class: "btn btn--small", id: "reality-history",
    "data-testid": "reality-history", "data-i18n": "reality.history", text: t("reality.history"),
    onclick: () => window.open("records.html", "_blank") });
  const quit = h("button", { type: "button", class: "btn btn--small", id: "reality-quit",
    "data-testid": "reality-quit", "data-i18n": "reality.quit", text: t("reality.quit"),
    onclick: () => location.assign(quitUrl()) });
  box.append(h("div", { class: "reality__ways" }, history, quit));
}
