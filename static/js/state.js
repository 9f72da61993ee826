// A table as the browser knows it: the snapshot, then table events applied in order.
// The same reducer serves the lobby, the table and the dealer console.

export const POSITIONS = ["P1", "P2", "P3", "P4", "P5"];
export const HANDS = [...POSITIONS, "BANKER"];
export const PLAYER_SPOTS = POSITIONS;
export const PAIR_SPOTS = POSITIONS.map((p) => `${p}_PAIR`);
export const SPOTS = [...PLAYER_SPOTS, ...PAIR_SPOTS];

export const isPairSpot = (spot) => spot.endsWith("_PAIR");

// The rules' multiples and odds are the server's (the snapshot's `payouts`, from
// livetable.rules): the page holds no copy of them, so a rule changed there is changed here.
// Until a snapshot has come, nothing is known and nothing can be bet.
let payouts = null;
/** The server's multiples and odds, once a snapshot brought them (else null). */
export const rulesPayouts = () => payouts;
/** What a bet of 1 on `spot` takes from the balance (bet + withholding, or the bet). */
export const deductedMultiple = (spot) =>
  (payouts ? (isPairSpot(spot) ? payouts.pair_deducted : payouts.player_deducted) : NaN);
/** What a bet of `amount` on `spot` takes from the balance. */
export const deductedFor = (spot, amount) => amount * deductedMultiple(spot);
/** The odds a spot is paid at, as the spot shows them: "11:1", "1:1 · 2:1". */
export function spotOdds(spot) {
  if (!payouts) return "";
  return isPairSpot(spot) ? `${payouts.pair_odds}:1` : payouts.player_odds.map((o) => `${o}:1`).join(" · ");
}

export function fromSnapshot(s) {
  if (s.payouts) payouts = s.payouts;
  const hands = {};
  for (const h of s.hands || []) hands[h.hand] = h;
  return {
    id: s.id,
    name: s.name || s.id,
    phase: s.phase,
    mode: s.mode,
    round_id: s.round_id ?? null,
    round_no: s.round_no ?? 0,
    shoe_id: s.shoe_id ?? null,
    closes_at: s.closes_at ?? null,
    limits: { min: 10, max: 5000, pair_min: 10, pair_max: 1000, round_max: 20000, ...(s.limits || {}) },
    hands,
    dealt: { ...(s.dealt || {}) },
    results: s.results || [],
    roadmap: sortRoadmap((s.roadmap || []).slice()),
    last_round: !!s.last_round,
    cut_card_out: !!s.cut_card_out,
    cards_left: s.cards_left ?? null,
    paused_reason: s.paused_reason ?? null,
    resume_phase: s.resume_phase ?? null,
    shuffling: !!s.shuffling,
    opens_at: s.opens_at ?? null,
    cancel_reason: null,
    bet_stats: null,  // bet_stats and round_winners are events only: a snapshot has neither
    winners: null,
    epoch: s.epoch,
    seq: s.seq,
  };
}

const allDealt = (st) => HANDS.every((h) => (st.dealt[h] || 0) >= 2);

function sortRoadmap(r) { return r.sort((a, b) => a.round_no - b.round_no); }

/** Apply one table event to the state (in place). Returns the state. */
export function applyEvent(st, ev) {
  switch (ev.type) {
    case "shoe_shuffling":  // a new shoe, until its opening card is read
      st.shuffling = true;
      st.shoe_id = ev.shoe_id;
      st.roadmap = [];
      st.cut_card_out = false;
      st.last_round = false;
      st.opens_at = null;  // the dealer reads the opening card first
      break;
    case "shoe_started":
      st.shuffling = false;
      st.shoe_id = ev.shoe_id;
      st.roadmap = [];
      st.cut_card_out = false;
      st.last_round = false;
      st.round_no = 0;
      st.cards_left = ev.cards_left;
      st.opens_at = ev.opens_at ?? null;
      break;
    case "round_opened":
      if (ev.shoe_id && ev.shoe_id !== st.shoe_id) { st.roadmap = []; st.shoe_id = ev.shoe_id; }
      st.round_id = ev.round_id;
      st.round_no = ev.round_no;
      st.closes_at = ev.closes_at;
      st.phase = "betting";
      st.hands = {};
      st.dealt = {};
      st.results = [];
      st.last_round = st.cut_card_out;  // the cut card came out between rounds: the last
      st.paused_reason = null;
      st.cancel_reason = null;
      st.opens_at = null;
      st.bet_stats = null;
      st.winners = null;
      break;
    case "betting_closed":
      // Cards are dealt face down while betting is open: with all of them out, the reveals
      // begin at once; else the dealer finishes dealing first.
      if (ev.round_id === st.round_id || !st.round_id) st.phase = allDealt(st) ? "revealing" : "dealing";
      break;
    case "card_dealt":
      st.dealt[ev.to] = Math.max(st.dealt[ev.to] || 0, ev.n);
      st.cards_left = ev.cards_left;
      // The Banker's second card is the round's last: after the close, the reveals begin.
      if (ev.to === "BANKER" && ev.n >= 2 && st.phase === "dealing") st.phase = "revealing";
      break;
    case "cards_voided":  // a mis-scan voided before any reveal: fewer cards face down
      st.dealt = { ...ev.dealt };
      st.cards_left = ev.cards_left;
      if (st.phase === "revealing") st.phase = "dealing";
      break;
    case "hand_revealed":
      st.hands[ev.hand] = {
        hand: ev.hand, cards: ev.cards, value: ev.value, points: ev.points,
        label: ev.label, flush: ev.flush, pair: ev.pair,
      };
      st.phase = "revealing";
      break;
    case "round_settled":
      st.results = ev.results || [];
      st.phase = "settled";
      st.last_round = !!ev.last_round;
      if (ev.last_round) st.cut_card_out = true;
      st.opens_at = ev.opens_at ?? null;
      if (!st.roadmap.some((r) => r.round_id === ev.round_id)) {
        const b = st.hands.BANKER;  // as the server's roadmap has it (for the statistics)
        st.roadmap.push({ round_id: ev.round_id, round_no: st.round_no, results: st.results,
          banker: b ? { value: b.value, points: b.points, pair: b.pair, flush: b.flush } : undefined });
        sortRoadmap(st.roadmap);
      }
      break;
    case "round_cancelled":
      st.phase = "cancelled";
      st.cancel_reason = ev.reason || "";
      st.paused_reason = null;
      st.closes_at = null;
      st.opens_at = ev.opens_at ?? null;
      break;
    case "table_paused":
      if (st.phase !== "paused") st.resume_phase = st.phase;
      st.phase = "paused";
      st.paused_reason = ev.reason || "";
      break;
    case "table_resumed":
      st.phase = st.resume_phase || "idle";
      if (typeof ev.closes_at === "number") st.closes_at = ev.closes_at;
      st.paused_reason = null;
      st.resume_phase = null;
      break;
    case "cut_card_out":  // the shoe's last round is this one (or the next)
      st.cut_card_out = true;
      st.last_round = !!ev.last_round;
      break;
    case "mode_changed":  // between rounds; the shoe went with the old mode
      st.mode = ev.mode;
      st.shoe_id = null;
      st.cut_card_out = false;
      st.last_round = false;
      st.cards_left = 0;
      st.shuffling = false;
      st.opens_at = ev.opens_at ?? null;
      break;
    case "bet_stats":  // how the round's bets lie on the spots: shares, no player named
      if (ev.round_id === st.round_id) st.bet_stats = { bettors: ev.bettors, spots: ev.spots };
      break;
    case "round_winners":  // the round's biggest wins, names as their operators allow
      if (ev.round_id === st.round_id) st.winners = ev.winners;
      break;
    default:
      break;
  }
  if (typeof ev.seq === "number") { st.epoch = ev.epoch; st.seq = ev.seq; }
  return st;
}
