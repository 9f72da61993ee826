// The table page's state, shared by its modules (table.js and the table*.js beside it,
// not tables.js), in one object so that each module reads and sets the same values:
// `S.st` is the table as state.js knows it, `S.player` the player and their balance, `bets`
// the player's bets in their stages (see table.js). State only one module uses stays there.

export const PREF_AUTO_CONFIRM = "livetable.autoConfirm";
export const PREF_SOUND = "livetable.sound";

const params = new URLSearchParams(location.search);

export const S = {
  tableId: params.get("table"),
  st: null,                 // table state (state.js)
  player: null,             // {id, name, balance}
  token: null,
  conn: null,
  justRevealed: null,       // hand to animate
  resumeWindow: null,       // {settled: [], timer} while a reconnect's replay arrives
  catchUpHead: null,        // welcome's head seq until a live event (seq > head) arrives
  newShoeUntil: 0,          // an auto shoe shuffles at once: show "new shoe" for a moment
  online: null,             // players online at the table (the server's presence frame)
  sessionEnded: null,       // the operator's session ended: its reason ("" if none given)
};
export const bets = {
  round_id: null,
  confirmed: {},            // spot → amount accepted this round
  pending: new Map(),       // bet_id → {bet_id, round_id, spot, amount, sent}
  draft: {},                // spot → amount
  history: [],              // previous drafts, for undo
  last: {},                 // the previous round's confirmed bets, for rebet
  settled: [],              // bet_settled frames of the shown round
  unsettled: new Map(),     // bet_id → accepted bet not yet settled (any round)
  unplaced: {},             // spot → draft amount the countdown ended on (never sent)
  autoTried: null,          // the draft auto-confirm last tried (tried once each)
};
export const prefs = { autoConfirm: readPref(PREF_AUTO_CONFIRM) === "1", sound: readPref(PREF_SOUND) === "on" };
// Another tab of the same player learns of balance changes this tab causes, and vice versa.
export const balanceChannel = "BroadcastChannel" in self ? new BroadcastChannel("livetable.balance") : null;

export function readPref(key) { try { return localStorage.getItem(key); } catch { return null; } }
export function writePref(key, value) { try { localStorage.setItem(key, value); } catch { /* private mode */ } }
