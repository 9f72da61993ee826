// A round's news on the felt: how its bets lie on the spots once betting has closed
// (the table event bet_stats: shares of the players and of the money, no player named), and
// its biggest wins once it is settled (round_winners: names as each winner's operator
// lets them be shown). Both come as table events, in order with the rest (video.js holds
// round_winners, like the results, until the video shows the Banker's hand); both are
// cleared when the next round opens. The shares sit on each spot; the line that says how
// many bet, then the winners for a few seconds, stand over the felt's limits line (limits
// say nothing once betting has closed), so nothing moves and no hand or spot is covered.

import { t, onLangChange } from "./i18n.js";
import { $, h, money, moneyLocale } from "./common.js";
import { SPOTS } from "./state.js";

const WINNERS_SHOWN_MS = 8000;

let stats = null;     // the round's bet_stats event, until the next round opens
let winners = null;   // its round_winners, while shown
let timer = null;

/** Show the round's news on `wrap` (the felt's wrapper) from `conn`'s table events. */
export function mountRoundNews(conn, wrap) {
  wrap.append(h("div", { class: "round-news", id: "round-news" },
    h("p", { class: "bet-stats", id: "bet-stats", "data-testid": "bet-stats", hidden: true }),
    h("section", { class: "winners", id: "winners", "data-testid": "winners", hidden: true,
      role: "status", "aria-live": "polite" })));
  conn.addEventListener("event", (e) => onEvent(e.detail));
  conn.addEventListener("welcome", (e) => { if (!e.detail.reconnect) clear(); });
  onLangChange(render);
}

function onEvent(ev) {
  switch (ev.type) {
    case "round_opened": clear(); break;
    case "bet_stats": stats = ev; render(); break;
    case "round_winners":
      winners = ev;
      clearTimeout(timer);
      timer = setTimeout(() => { winners = null; render(); }, WINNERS_SHOWN_MS);
      render();
      break;
    default: break;
  }
}

function clear() {
  stats = null;
  winners = null;
  clearTimeout(timer);
  render();
}

function render() {
  renderWinners();
  renderShares();
}

/** On each spot: the players' and the money's shares, the money's drawn as a bar too. */
function renderShares() {
  const shares = Object.fromEntries((stats ? stats.spots : []).map((s) => [s.spot, s]));
  for (const spot of SPOTS) {
    const button = $(`#spot-${spot}`);
    if (!button) continue;
    let el = button.querySelector(".spot__share");
    const s = shares[spot];
    if (!s) { if (el) el.remove(); continue; }
    if (!el) {
      // in the odds' place (betting is over): the spot keeps its height
      el = h("span", { class: "spot__share", "data-testid": `share-${spot}` });
      button.querySelector(".spot__odds").after(el);
    }
    el.dataset.players = String(s.players);
    el.dataset.money = String(s.money);
    el.title = t("news.share", { players: s.players, money: s.money });
    el.textContent = `${s.players}% · ${s.money}%`;
    el.style.setProperty("--money", `${s.money}%`);  // the money's share, as a bar behind
  }
  const caption = $("#bet-stats");
  if (!caption) return;
  caption.hidden = !stats || !!winners;  // one line: the winners, once they come
  if (stats) {
    caption.textContent = t(stats.bettors === 1 ? "news.bettors_one" : "news.bettors", { n: stats.bettors });
    caption.dataset.bettors = String(stats.bettors);
  }
}

function renderWinners() {
  const board = $("#winners");
  if (!board) return;
  board.hidden = !winners;
  if (!winners) { board.replaceChildren(); return; }
  board.replaceChildren(
    h("h2", { class: "winners__title", text: t("news.winners") }),
    h("ol", {}, winners.winners.map((w) => h("li", { "data-amount": String(w.amount) },
      h("span", { class: "winners__name", text: w.name }),
      h("span", { class: "winners__amount", text: `+${winAmount(w)}` })))));
}

/** A win in its own currency when it is not the table's (an operator of another one). */
function winAmount(w) {
  if (!w.currency) return money(w.amount);
  try {
    const f = new Intl.NumberFormat(moneyLocale(), { style: "currency", currency: w.currency,
      currencyDisplay: "narrowSymbol" });
    return f.format(w.amount / 10 ** f.resolvedOptions().maximumFractionDigits);
  } catch { return money(w.amount); }
}
