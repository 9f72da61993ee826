// The table page: watch a round, bet on it, see it settle.
//
// State comes from two places and is never guessed: the table (snapshot + table events,
// through state.js) and the player's own frames (bet_accepted / bet_rejected /
// bet_settled, and the balance they carry). Bets go through three stages here:
//   draft    — chips placed on spots, not yet sent (undo, clear, rebet, double work here);
//   pending  — sent with a fresh bet_id, all of one Confirm in one slip (place_bets, a
//              fresh slip_id: taken whole or not at all), no answer yet. If the socket
//              drops, the slip is sent again after the next welcome with the SAME slip_id
//              and bet_ids, so the server takes it once;
//   confirmed — slip_accepted; shown on the spot until the next round opens.
// Chips still in draft when the countdown ends were never sent: they stay on the spot marked
// "not placed" until the next round, and a notice says so (or, with auto-confirm on, they
// are sent just before the end). Messages about bets show at the top of the table (a toast),
// where the player is looking when they tap a spot.
//
// The connection: while it is down the felt is covered by an overlay that says what became
// of the player's bets (sent and unanswered, confirmed, or chips never sent), and the
// countdown stands still — the table's time is unknown until it is back.
//
// This module starts the page and wires it to the connection; the rest is by concern:
// tablestate.js (the state the modules share), tablefelt.js (layout and drawing),
// tablebets.js (chips, the draft, Confirm), tableresults.js (toasts, payout, sound,
// sentences), tableframes.js (the server's frames), tableresume.js (away and back).

import { t, onLangChange } from "./i18n.js";
import { $, h, initPage, bindConnection } from "./common.js";
import { Connection } from "./conn.js";
import { getJSON, ensureGuest } from "./api.js";
import { mountVideo } from "./video.js";
import { mountChat } from "./chat.js";
import { mountRoundNews } from "./roundnews.js";
import { mountHistory } from "./history.js";
import { mountRealityCheck } from "./reality.js";
import { mountAutoplay } from "./autoplay.js";
import { mountChatDock } from "./chatdock.js";
import { mountTableSwitch } from "./tables.js";
import { mountTips } from "./tipping.js";
import { launchedToken } from "./operator.js";
import { keptEnd } from "./session.js";
import { buildLayout, showChat, render, tickCountdown, renderWallet } from "./tablefelt.js";
import { buildChips, onKey, renderControls, betting } from "./tablebets.js";
import { onWelcome, endSession, onFatal, onTableEvent, onPrivate, onOtherTabBalance } from "./tableframes.js";
import { markSeen, renderConnection } from "./tableresume.js";
import { S, balanceChannel } from "./tablestate.js";

let tips = null;  // the tip button and its sheet (tipping.js), once the table is known

async function main() {
  initPage({ active: "table", connection: true });
  buildLayout();
  onLangChange(() => {
    if (S.sessionEnded !== null) endSession(S.sessionEnded);
    buildChips(); render(); if (tips) tips.refresh();
  });

  if (!S.tableId) {
    try {
      const { tables } = await getJSON("/api/tables");
      if (tables && tables.length) S.tableId = tables[0].id;
    } catch { /* the lobby link below still works */ }
    if (!S.tableId) { $("#table-name").textContent = t("table.none"); return; }
    history.replaceState(null, "", `?table=${encodeURIComponent(S.tableId)}`);
  }

  S.token = launchedToken();  // a session an operator launched, else a demo guest
  const ended = S.token ? null : keptEnd();
  if (ended) { endSession(ended.reason); return; }  // reloaded after the end: still over
  if (!S.token) {
    try {
      const g = await ensureGuest();
      if (g) { S.token = g.token; S.player = g.player || null; }
    } catch { S.token = null; }
  }
  renderWallet();

  S.conn = new Connection({ path: "/ws", table: S.tableId, token: () => S.token });
  mountVideo(S.conn, $("#felt"));  // the table's video; reveals and results in step with it
  mountChat(S.conn, $("#chat"), { presenter: $("#presenter") });  // the chat, who deals
  mountRoundNews(S.conn, $("#felt-wrap"));  // the bets' spread at the close, the winners
  mountRealityCheck(S.conn, $("#reality-check"));  // keep playing, view history, quit
  mountAutoplay(S.conn, betting);  // the same layout for N rounds, with stops
  tips = mountTips(S.conn, { button: $("#btn-tip"), sheet: $("#tip-sheet"),  // tip the dealer
    player: () => S.player, balance: () => (S.player ? S.player.balance : null) });
  mountTableSwitch(S.conn, $(".tablebar__tools"), () => S.tableId);  // another table, same session
  mountHistory(S.conn, $("#felt-wrap"), $("#roadmap-panel"),  // the last 20, my bets this shoe
    { token: () => S.token, shoeId: () => S.st && S.st.shoe_id, tableId: () => S.tableId });
  $("#chat").append(h("button", { type: "button", class: "btn btn--small chat__close", id: "chat-close",
    "data-testid": "close-chat", "data-i18n": "tabs.close", text: t("tabs.close") }));
  $("#chat-close").addEventListener("click", () => showChat(false));
  mountChatDock($("#chat"), $("#felt-wrap"), $("#btn-chat"));  // a phone: over the video
  bindConnection(S.conn);
  S.conn.addEventListener("welcome", (e) => onWelcome(e.detail.msg, e.detail.reconnect));
  S.conn.addEventListener("event", (e) => onTableEvent(e.detail));
  S.conn.addEventListener("message", (e) => onPrivate(e.detail));
  S.conn.addEventListener("fatal", (e) => onFatal(e.detail));
  S.conn.addEventListener("state", () => { renderConnection(); renderControls(); renderWallet(); });
  S.conn.addEventListener("event", () => markSeen());
  S.conn.addEventListener("pong", () => markSeen());
  S.conn.start();

  setInterval(tickCountdown, 200);
  document.addEventListener("keydown", onKey);
  if (balanceChannel) balanceChannel.onmessage = (e) => onOtherTabBalance(e.data);
}

main();
