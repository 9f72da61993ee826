// Cards: the wire notation, the same lenient input grammar as the server
// (livetable/rules/cards.py), a hand evaluator for display, and the card drawings.
//
// The server is the judge of every hand; the evaluator here only labels hands the
// browser already has (the Bet Record holds cards, not values) and must agree with
// livetable/rules/hands.py — tests/e2e checks that it does.

const RANKS = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"];
const RANK_INPUT = Object.fromEntries(RANKS.map((r, i) => [r, i + 1]));
RANK_INPUT.T = 10;
RANK_INPUT["1"] = 1;
const SUIT_INPUT = {
  S: "S", "♠": "S", "♤": "S",
  H: "H", "♥": "H", "♡": "H",
  D: "D", "♦": "D", "♢": "D",
  C: "C", "♣": "C", "♧": "C",
};
export const SUIT_SYMBOL = { S: "♠", H: "♥", D: "♦", C: "♣" };

/** Parse one card leniently ("10D", "td", "K♥", " kh ") → {rank 1..13, suit, text} or null. */
export function parseCard(token) {
  const text = String(token).trim().toUpperCase();
  const chars = Array.from(text); // suit symbols are one code point each
  if (chars.length < 2) return null;
  const suit = SUIT_INPUT[chars[chars.length - 1]];
  const rank = RANK_INPUT[chars.slice(0, -1).join("")];
  if (!rank || !suit) return null;
  return { rank, suit, text: RANKS[rank - 1] + suit };
}

function points(rank) { return rank < 10 ? rank : 0; }
function isFace(rank) { return rank >= 11; }

/**
 * Evaluate two cards as docs/design.md §1 reads the rules.
 * Returns {value: "0".."9" | "7.1".."7.5", tenths, points, flush, pair, combo, special}
 * where combo is null or one of "7.5" … "7.1" (the i18n keys of the combination names).
 */
export function evaluate(cardA, cardB) {
  const a = typeof cardA === "string" ? parseCard(cardA) : cardA;
  const b = typeof cardB === "string" ? parseCard(cardB) : cardB;
  if (!a || !b) return null;
  const pts = (points(a.rank) + points(b.rank)) % 10;
  const flush = a.suit === b.suit;
  const pair = a.rank === b.rank;
  let combo = null;
  const ranks = new Set([a.rank, b.rank]);
  if (flush && ranks.has(1) && ranks.has(13)) combo = "7.5";
  else if (pair && [1, 5, 6, 10].includes(a.rank)) combo = "7.4";
  else if (isFace(a.rank) && isFace(b.rank)) combo = "7.3";
  else if (ranks.has(10) && (isFace(a.rank) || isFace(b.rank))) combo = "7.2";
  else if (flush && !isFace(a.rank) && !isFace(b.rank) && pts === 0) combo = "7.1";
  const tenths = combo ? Math.round(Number(combo) * 10) : pts * 10;
  return {
    value: combo || String(pts), tenths, points: pts, flush, pair, combo,
    special: flush || pair || combo !== null,
  };
}

/** A drawn card: rank and suit symbol in the corner, a large suit in the middle. */
export function cardEl(card, { small = false } = {}) {
  const c = typeof card === "string" ? parseCard(card) : card;
  const el = document.createElement("span");
  el.className = "card" + (small ? " card--small" : "");
  if (!c) {
    el.classList.add("card--unknown");
    el.textContent = String(card);
    return el;
  }
  const rank = RANKS[c.rank - 1];
  const sym = SUIT_SYMBOL[c.suit];
  if (c.suit === "H" || c.suit === "D") el.classList.add("card--red");
  el.dataset.card = c.text;
  el.setAttribute("role", "img");
  el.setAttribute("aria-label", `${rank}${sym}`);
  el.innerHTML =
    `<span class="card__corner" aria-hidden="true"><span class="card__rank">${rank}</span>` +
    `<span class="card__suit">${sym}</span></span>` +
    `<span class="card__pip" aria-hidden="true">${sym}</span>` +
    `<span class="card__corner card__corner--end" aria-hidden="true"><span class="card__rank">${rank}</span>` +
    `<span class="card__suit">${sym}</span></span>`;
  return el;
}

/** A face-down card (card_dealt carries no card identity). */
export function cardBackEl({ small = false } = {}) {
  const el = document.createElement("span");
  el.className = "card card--back" + (small ? " card--small" : "");
  el.setAttribute("aria-hidden", "true");
  return el;
}

/** Render a list of cards ("KH 9H") inline as drawn cards. */
export function cardsFragment(cards, opts) {
  const frag = document.createDocumentFragment();
  for (const c of cards || []) frag.append(cardEl(c, opts));
  return frag;
}
