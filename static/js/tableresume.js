// The table page across a dropped connection or a reload: when this browser last saw the
// table live, the bets that settled while the player was away (from a reconnect's replay
// or the Bet Record) summed up on arrival, and the overlay on the felt while the
// connection is down, saying what became of each bet.

import { t } from "./i18n.js";
import { $, h, money, spotName } from "./common.js";
import { serverNow } from "./clock.js";
import { getJSON } from "./api.js";
import { render } from "./tablefelt.js";
import { sum, deducted, pendingDeducted, inPlay } from "./tablebets.js";
import { showResumeSummary } from "./tableresults.js";
import { S, bets } from "./tablestate.js";

const RESUME_WINDOW_MS = 2500;

// When this browser last saw the table live: bets settled after it were settled while
// the player was away (even across a reload), and are summed up on arrival.
const SEEN_KEY = "livetable.lastSeen";
let seenWritten = 0;
export function markSeen(force = false) {
  const now = Date.now();
  if (force !== true && now - seenWritten < 2000) return;
  seenWritten = now;
  // On the server's clock, like the Bet Record's settled_at.
  try { localStorage.setItem(SEEN_KEY, String(Math.round(serverNow()) + 500)); } catch { /* private mode */ }
}
function lastSeen() {
  try { return Number(localStorage.getItem(SEEN_KEY)) || 0; } catch { return 0; }
}

/** After a reload: this round's confirmed bets and the last round's (for rebet) from the Bet Record. */
export async function restoreFromRecord() {
  if (!S.token) return;
  const since = lastSeen();
  try {
    const { bets: rows } = await getJSON("/api/bets?limit=50", { token: S.token });
    if (!rows || !S.st) return;
    const away = rows.filter((r) => since && r.settled_at && r.settled_at > since && r.state !== "accepted");
    if (away.length) {
      showResumeSummary(away.reverse().map((r) => ({ bet_id: r.bet_id, round_id: r.round_id,
        spot: r.spot, amount: r.amount, outcome: r.state === "refunded" ? "refund" : r.outcome,
        odds: r.odds, returned: r.returned, balance: r.balance_after, round_no: r.round_no })));
    }
    const mine = rows.filter((r) => r.table === S.tableId);
    const current = mine.filter((r) => r.round_id === S.st.round_id);
    if (current.length && !Object.keys(bets.confirmed).length) {
      for (const r of current) {
        bets.confirmed[r.spot] = (bets.confirmed[r.spot] || 0) + r.amount;
        if (r.state === "accepted") bets.unsettled.set(r.bet_id, r);
      }
    }
    const prev = mine.find((r) => r.round_id !== S.st.round_id);
    if (prev && !Object.keys(bets.last).length) {
      for (const r of mine.filter((x) => x.round_id === prev.round_id)) {
        bets.last[r.spot] = (bets.last[r.spot] || 0) + r.amount;
      }
    }
    render();
  } catch { /* the Bet Record is a convenience here */ }
}

// ---------------------------------------------------------------- resume summary

export function openResumeWindow(resumed) {
  clearTimeout(S.resumeWindow && S.resumeWindow.timer);
  const settled = S.resumeWindow ? S.resumeWindow.settled : [];
  S.resumeWindow = { settled, resumed, timer: setTimeout(closeResumeWindow, RESUME_WINDOW_MS) };
}

export function addToResumeSummary(msg) {
  if (!S.resumeWindow.settled.some((s) => s.bet_id === msg.bet_id)) S.resumeWindow.settled.push(msg);
  clearTimeout(S.resumeWindow.timer);
  S.resumeWindow.timer = setTimeout(closeResumeWindow, 800);
}

async function closeResumeWindow() {
  const w = S.resumeWindow;
  S.resumeWindow = null;
  if (!w) return;
  // Without a replay, bets we knew as open may have settled while we were away:
  // the Bet Record has them.
  if (bets.unsettled.size && S.token) {
    try {
      const { bets: rows } = await getJSON("/api/bets?limit=50", { token: S.token });
      for (const r of rows || []) {
        if (!bets.unsettled.has(r.bet_id) || r.state === "accepted") continue;
        bets.unsettled.delete(r.bet_id);
        w.settled.push({ bet_id: r.bet_id, round_id: r.round_id, spot: r.spot, amount: r.amount,
          outcome: r.state === "refunded" ? "refund" : r.outcome, odds: r.odds, returned: r.returned,
          balance: r.balance_after, round_no: r.round_no });
      }
    } catch { /* nothing more to add */ }
  }
  if (!w.settled.length) return;
  showResumeSummary(w.settled);
}

/** The overlay on the felt while the connection is down, and what became of the bets. */
export function renderConnection() {
  const overlay = $("#conn-overlay");
  // fatal: not reconnecting at all (an ended session), which the page says elsewhere
  const down = !!(S.conn && S.conn.everWelcomed && !S.conn.online && S.conn.state !== "fatal");
  overlay.hidden = !down;
  if (!down) return;
  const offline = S.conn.state === "offline";
  $("#conn-overlay-title").textContent = t(offline ? "overlay.offline" : "overlay.reconnecting");
  $("#conn-overlay-detail").textContent = t("overlay.frozen");
  const items = [];
  for (const p of bets.pending.values()) {
    items.push(["pending", t("overlay.pending", { spot: spotName(p.spot), amount: money(p.amount) })]);
  }
  const confirmed = inPlay() - pendingDeducted();
  if (confirmed) items.push(["confirmed", t("overlay.confirmed", { amount: money(confirmed) })]);
  const draft = deducted(bets.draft);
  if (draft) items.push(["draft", t("overlay.draft", { amount: money(sum(bets.draft)) })]);
  if (!items.length) items.push(["none", t("overlay.none")]);
  $("#conn-overlay-bets").replaceChildren(...items.map(([state, text]) =>
    h("li", { "data-testid": "inflight-item", "data-state": state, text })));
}
