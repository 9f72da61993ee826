// A session an operator launched (docs/operator.md §3): the token, and the language (read
// by i18n.js before the page's first paint), arrive in the URL fragment — never in the
// query, so no server or log ever sees them. The page keeps the token for this tab (a
// reload stays logged in) and drops the fragment from the address bar. The balance and
// currency are then the operator's: the page asks for them (get_balance) after each round
// instead of trusting bet_settled's balance, which is livetable's own ledger's.

import { keepLaunch } from "./session.js";

const SESSION_KEY = "livetable.session";

/** The launched session's token, from the fragment (first load) or this tab's storage. */
export function launchedToken() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const token = hash.get("token");
  if (token) {
    sessionStorage.setItem(SESSION_KEY, token);
    keepLaunch(hash);
    history.replaceState(null, "", location.pathname + location.search);
    return token;
  }
  return sessionStorage.getItem(SESSION_KEY);
}

export function forgetSession() { sessionStorage.removeItem(SESSION_KEY); }

/** The balance as shown: money() carries the session's currency symbol once setCurrency
 *  has been told it (common.js); the code is added only where the browser knows no such
 *  currency. */
export function withCurrency(text, player) {
  if (!player || !player.currency || /\p{Sc}|[A-Z]{3}/u.test(text)) return text;
  return `${text} ${player.currency}`;
}
