// "Verify this shoe": the provably fair check (docs/design.md §7) in the browser.
//
// When the server shuffles, shoe_started carries a commitment: SHA-256 of
// salt + ":" + cut_at + ":" + order.join(","). Once the shoe has ended, GET /api/shoes/{id}
// reveals the salt, the cut card and the order. This module
//   * remembers every commitment the page saw announced (localStorage), so that the check
//     can prove the order was fixed before the bets, not merely that the record agrees
//     with itself;
//   * remembers every hand this browser saw revealed (localStorage, from the table page);
//   * checks a revealed shoe exactly as `livetable verify-shoe` does (livetable/rules/
//     fairness.py check_shoe — the same rule, kept identical and tested against it in
//     tests/e2e/test_verify_shoe.py): the hash (crypto.subtle), 8 full decks, the opening
//     card and its burns, and every round's published cards as the next slots of the order
//     in the dealing order — a record that leaves a slot unaccounted for (a round without
//     cards) does not verify; then, in the browser only, that the record is the shoe asked
//     for and that every hand this browser saw revealed is in it as revealed;
//   * checks the shoe's game log (docs/security.md, "The game log"): every round chained by
//     HMAC-SHA256 from the commitment to the record's chain_head, the round count and why
//     the shoe ended, and that every log head this browser saw published (round_settled,
//     round_cancelled, shoe_revealed: chain_head, kept in localStorage) is in the record —
//     a record cut short, reordered or recast after it does not verify;
//   * renders verify.html?shoe=<id>, and offers links to it: on the table page when a shoe
//     ends, and in the Bet Record next to a bet whose shoe has ended.
// The pages call three small hooks: noteSnapshot(snapshot), noteTableEvent(ev) (table page)
// and verifyLink(shoeId) (Bet Record). Its strings are in js/i18n/<lang>.js (verify.*).

import { t, onLangChange } from "./i18n.js";
import { $, h, spotName, initPage } from "./common.js";
import { getJSON } from "./api.js";

// ------------------------------------------------------------------ commitments seen

const SEEN_KEY = "livetable.commitments";
const SEEN_MAX = 100;

function seenCommitments() {
  try { return JSON.parse(localStorage.getItem(SEEN_KEY) || "{}") || {}; } catch { return {}; }
}

/** Keep the commitment announced for `shoeId` (the latest SEEN_MAX shoes). */
export function rememberCommitment(shoeId, commitment) {
  if (!shoeId || typeof commitment !== "string") return;
  const seen = seenCommitments();
  if (seen[shoeId] === commitment) return;
  delete seen[shoeId];
  seen[shoeId] = commitment;
  const ids = Object.keys(seen);
  for (const id of ids.slice(0, Math.max(0, ids.length - SEEN_MAX))) delete seen[id];
  try { localStorage.setItem(SEEN_KEY, JSON.stringify(seen)); } catch { /* private mode */ }
}

const REVEALS_KEY = "livetable.reveals";
const REVEALS_MAX = 500;  // rounds

function seenReveals() {
  try { return JSON.parse(localStorage.getItem(REVEALS_KEY) || "{}") || {}; } catch { return {}; }
}

/** Keep a hand this browser saw revealed: round id → {hand: cards} (the latest REVEALS_MAX
 * rounds). The verify page holds the server's record of the shoe to them. */
export function rememberReveal(roundId, hand, cards) {
  if (!roundId || !hand || !Array.isArray(cards)) return;
  const seen = seenReveals();
  const round = seen[roundId] || {};
  delete seen[roundId];
  round[hand] = cards;
  seen[roundId] = round;
  const ids = Object.keys(seen);
  for (const id of ids.slice(0, Math.max(0, ids.length - REVEALS_MAX))) delete seen[id];
  try { localStorage.setItem(REVEALS_KEY, JSON.stringify(seen)); } catch { /* private mode */ }
}

/** The reveals this browser saw of the rounds of `shoeId` (round id → {hand: cards}). */
export function revealsOf(shoeId) {
  const all = seenReveals();
  return Object.fromEntries(Object.entries(all).filter(([id]) => id.startsWith(`${shoeId}.`)
    && /^\d+$/.test(id.slice(shoeId.length + 1))));
}

const HEADS_KEY = "livetable.chain_heads";
const HEADS_MAX = 100;  // shoes

function seenHeadsAll() {
  try { return JSON.parse(localStorage.getItem(HEADS_KEY) || "{}") || {}; } catch { return {}; }
}

/** Keep a game log head the table published for `shoeId` (the latest HEADS_MAX shoes). */
export function rememberHead(shoeId, head) {
  if (!shoeId || typeof head !== "string") return;
  const seen = seenHeadsAll();
  const heads = seen[shoeId] || [];
  delete seen[shoeId];
  if (!heads.includes(head)) heads.push(head);
  seen[shoeId] = heads;
  const ids = Object.keys(seen);
  for (const id of ids.slice(0, Math.max(0, ids.length - HEADS_MAX))) delete seen[id];
  try { localStorage.setItem(HEADS_KEY, JSON.stringify(seen)); } catch { /* private mode */ }
}

/** The game log heads this browser saw published for `shoeId`. */
export function headsOf(shoeId) { return seenHeadsAll()[shoeId] || []; }

const shoeOfRound = (roundId) => String(roundId || "").replace(/\.\d+$/, "");

/** Hook: a table snapshot (welcome, lobby) — remember its shoe's commitment. */
export function noteSnapshot(snap) {
  if (snap) rememberCommitment(snap.shoe_id, snap.shoe_commitment);
}

/** Hook: a table event — remember commitments; when a shoe ends, offer to verify it. */
export function noteTableEvent(ev) {
  if (ev.type === "shoe_started") rememberCommitment(ev.shoe_id, ev.commitment);
  if (ev.type === "hand_revealed") rememberReveal(ev.round_id, ev.hand, ev.cards);
  if (ev.type === "round_settled" || ev.type === "round_cancelled") rememberHead(shoeOfRound(ev.round_id), ev.chain_head);
  if (ev.type === "shoe_revealed") rememberHead(ev.shoe_id, ev.chain_head);
  if (ev.type === "shoe_revealed") showEndedShoe(ev.shoe_id);
}

export function verifyUrl(shoeId) { return `verify.html?shoe=${encodeURIComponent(shoeId)}`; }

function linkTo(shoeId) {
  return h("a", { class: "btn btn--small", href: verifyUrl(shoeId), "data-testid": "verify-shoe-link",
    "data-shoe-id": shoeId, text: t("verify.link") });
}

/** On the table page: "Shoe t1.3 has ended: Verify this shoe", under the roadmap. */
function showEndedShoe(shoeId) {
  const anchor = $("#roadmap-legend") || $("#roadmap");
  if (!anchor) return;
  let slot = $("#shoe-verify");
  if (!slot) {
    slot = h("p", { id: "shoe-verify", class: "small", "data-testid": "shoe-verify" });
    anchor.after(slot);
  }
  const render = () => slot.replaceChildren(t("verify.ended", { id: shoeId }), " ", linkTo(shoeId));
  render();
  onLangChange(render);
}

const revealed = new Map();  // shoe id → Promise<boolean>: has it a revealed record?
let shoesInPlay = null;  // Promise<Set<shoe id>>: every table's current shoe

/** For the Bet Record: a "Verify this shoe" link that shows only once the shoe has ended
 * and was revealed. A shoe still in play at its table is not asked for (its 404 would be
 * noise in the console); an ended one is (a manual shoe has no record: no link). */
export function verifyLink(shoeId) {
  const slot = h("span", { class: "verify-slot" });
  if (!shoeId) return slot;
  if (!shoesInPlay) {
    shoesInPlay = getJSON("/api/tables")
      .then((r) => new Set((r.tables || []).map((tb) => tb.shoe_id).filter(Boolean)))
      .catch(() => null);
  }
  shoesInPlay.then((current) => {
    if (!current || current.has(shoeId)) return;
    if (!revealed.has(shoeId)) {
      revealed.set(shoeId, fetch(`/api/shoes/${encodeURIComponent(shoeId)}`, { cache: "no-store" })
        .then((r) => r.ok).catch(() => false));
    }
    revealed.get(shoeId).then((ok) => { if (ok) slot.replaceChildren(linkTo(shoeId)); });
  });
  return slot;
}

// ------------------------------------------------------------------ the check

const CARD = /^(A|[2-9]|10|J|Q|K)[SHDC]$/;
const RANKS = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"];
const DECK = RANKS.flatMap((r) => ["S", "H", "D", "C"].map((s) => r + s));
const DECKS = 8;
const HANDS = ["P1", "P2", "P3", "P4", "P5", "BANKER"];
const ROUND_CARDS = 13;

/** A–9 burn their value, 10/J/Q/K burn ten (docs/design.md §1). */
export function burnCount(card) {
  const rank = card.slice(0, -1);
  if (rank === "A") return 1;
  const n = Number(rank);
  return n >= 2 && n <= 9 ? n : 10;
}

export async function sha256Hex(text) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The game log's link (docs/security.md): HMAC-SHA256 keyed with the salt's UTF-8, over six
 * lines: the head before, the round id, its state, when it ended, its cards in the order
 * dealt, its outcome per spot (spot=outcome, sorted by spot). Lowercase hex. */
export async function chainLink(salt, previous, roundId, state, at, cards, spots) {
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey("raw", enc.encode(salt), { name: "HMAC", hash: "SHA-256" },
    false, ["sign"]);
  const outcomes = Object.keys(spots || {}).sort().map((k) => `${k}=${spots[k]}`).join(",");
  const text = [previous, roundId, state, String(at), cards.join(","), outcomes].join("\n");
  const mac = await crypto.subtle.sign("HMAC", key, enc.encode(text));
  return Array.from(new Uint8Array(mac), (b) => b.toString(16).padStart(2, "0")).join("");
}

const ENDINGS = ["cut_card", "set_aside", "restored"];

/** The game log of a record: its heads recomputed, and whether it says why the shoe ended,
 * how many rounds it had, and ends as it says (the same rule as fairness.py _log_problems). */
async function checkLog(shoe, order, first, seenHeads) {
  const rounds = Array.isArray(shoe.rounds) ? shoe.rounds : [];
  const heads = [];
  const starts = [];
  let head = shoe.commitment;
  let at = first;
  let facts = true;
  for (const r of rounds) {
    const dealt = Math.max(0, Number.isInteger(r.dealt) ? r.dealt : 0);
    if (!Number.isInteger(r.at) || (r.state === "settled" && !(r.spots && Object.keys(r.spots).length))) facts = false;
    head = await chainLink(shoe.salt, head, r.round_id, r.state, r.at || 0, order.slice(at, at + dealt), r.spots || {});
    heads.push(head);
    starts.push(at);
    at += dealt;
  }
  const tookCut = rounds.map((r, i) => starts[i] <= shoe.cut_at && shoe.cut_at < starts[i] + Math.max(0, r.dealt || 0));
  let ending = ENDINGS.includes(shoe.ended_by) && shoe.round_count === rounds.length;
  if (shoe.ended_by === "cut_card") ending = ending && tookCut.length > 0 && tookCut[tookCut.length - 1];
  else ending = ending && !tookCut.some(Boolean);
  const known = new Set([shoe.commitment, ...heads]);
  const missing = (seenHeads || []).filter((x) => !known.has(x));
  return { chain: facts && shoe.chain_head === (heads.length ? heads[heads.length - 1] : shoe.commitment),
    ending, missing };
}

/**
 * Check a revealed shoe. Returns {ok, checks: [{key, ok, params}], rounds: [{round, ok,
 * problems}]} — the same rules as livetable/rules/fairness.py check_shoe; and, given
 * `asked` (the shoe id the page asked for) and `reveals` (what this browser saw, see
 * revealsOf), the two checks only a browser that watched the table can make.
 */
export async function checkShoe(shoe, seenCommitment, asked = null, reveals = null, seenHeads = null) {
  const checks = [];
  const add = (key, ok, params = {}) => checks.push({ key, ok, params });
  const order = Array.isArray(shoe.order) ? shoe.order : [];
  const computed = await sha256Hex(`${shoe.salt}:${shoe.cut_at}:${order.join(",")}`);
  if (asked !== null) add("verify.check.id", shoe.shoe_id === asked, { id: asked });
  add("verify.check.hash", computed === shoe.commitment && /^[0-9a-f]{64}$/.test(shoe.salt || ""),
    { computed });
  if (seenCommitment) add("verify.check.seen", seenCommitment === shoe.commitment);
  const counts = new Map();
  for (const c of order) counts.set(c, (counts.get(c) || 0) + 1);
  add("verify.check.decks", order.length === 52 * DECKS && order.every((c) => CARD.test(c))
    && DECK.every((c) => counts.get(c) === DECKS));
  const opening = order[0] || "";
  const burned = CARD.test(opening) ? burnCount(opening) : 0;
  add("verify.check.opening", CARD.test(opening) && (shoe.burn_card == null || shoe.burn_card === opening)
    && (shoe.burned == null || shoe.burned === burned), { card: opening, n: burned });

  const rounds = [];
  let at = 1 + burned;
  let cutOut = shoe.cut_at < at;
  let over = false;
  let cutOk = Number.isInteger(shoe.cut_at) && shoe.cut_at > 0 && shoe.cut_at < order.length;
  (shoe.rounds || []).forEach((r, i) => {
    const problems = [];
    if (r.round_no !== i + 1 || r.round_id !== `${shoe.shoe_id}.${i + 1}`) problems.push("numbering");
    if (over) cutOk = false;
    const dealt = Number.isInteger(r.dealt) ? r.dealt : -1;
    if (dealt < 0 || dealt > ROUND_CARDS || at + dealt > order.length) problems.push("cards taken");
    if (!["settled", "cancelled"].includes(r.state)) problems.push("state");
    if (r.state === "settled" && dealt !== ROUND_CARDS) problems.push("cards taken");
    if (!r.cards || typeof r.cards !== "object") {
      problems.push("unpublished");  // a slot of the order left unaccounted for
    } else {
      const slots = order.slice(at, at + Math.max(0, dealt));
      for (const [k, hand] of HANDS.entries()) {
        const want = [slots[1 + k], slots[7 + k]].filter((c) => c !== undefined);
        const got = r.cards[hand];
        if (!Array.isArray(got) || got.length !== want.length || got.some((c, j) => c !== want[j])) problems.push(hand);
      }
      if (Object.keys(r.cards).some((k) => !HANDS.includes(k))) problems.push("hands");
    }
    cutOut = cutOut || (at <= shoe.cut_at && shoe.cut_at < at + Math.max(0, dealt));
    over = cutOut;
    at += Math.max(0, dealt);
    rounds.push({ round: r, ok: problems.length === 0, problems });
  });
  add("verify.check.rounds", rounds.every((r) => r.ok));
  add("verify.check.cut", cutOk);
  const log = await checkLog(shoe, order, 1 + burned, seenHeads);
  add("verify.check.log", log.chain, { head: shoe.chain_head });
  add("verify.check.ending", log.ending, { n: shoe.round_count, why: shoe.ended_by });
  if (seenHeads && seenHeads.length) add("verify.check.heads", log.missing.length === 0, { n: seenHeads.length });
  const watched = Object.entries(reveals || {});
  if (watched.length) {
    // Every hand this browser saw revealed is in the record, in a settled round, as seen.
    const byId = new Map((shoe.rounds || []).map((r) => [r.round_id, r]));
    const differ = watched.filter(([id, hands]) => {
      const r = byId.get(id);
      return !r || r.state !== "settled" || !r.cards || Object.entries(hands).some(([hand, cards]) =>
        !Array.isArray(r.cards[hand]) || r.cards[hand].join(",") !== cards.join(","));
    }).map(([id]) => id);
    for (const r of rounds) {
      if (differ.includes(r.round.round_id)) { r.ok = false; r.problems.push("seen"); }
    }
    add("verify.check.reveals", differ.length === 0, { n: watched.length });
  }
  const ok = checks.every((c) => c.ok);
  return { ok, checks, rounds, seen: !!seenCommitment };
}

// ------------------------------------------------------------------ the page

async function page() {
  initPage({ active: null });
  const shoeId = new URLSearchParams(location.search).get("shoe");
  const out = $("#verify");
  let last = null;
  const render = () => { if (last) out.replaceChildren(...last()); };
  onLangChange(render);
  const show = (fn) => { last = fn; render(); };
  if (!shoeId) { show(() => [h("p", { class: "muted", text: t("verify.no_shoe") })]); return; }
  show(() => [h("p", { class: "muted", text: t("verify.loading", { id: shoeId }) })]);
  let shoe;
  try {
    shoe = await getJSON(`/api/shoes/${encodeURIComponent(shoeId)}`);
  } catch (e) {
    const key = e.status === 404 ? "verify.not_found" : "verify.error";
    show(() => [h("p", { class: "banner", "data-testid": "verify-result", "data-ok": "",
      text: t(key, { id: shoeId }) })]);
    return;
  }
  if (!(globalThis.crypto && crypto.subtle)) {
    show(() => [h("p", { class: "banner", "data-testid": "verify-result", "data-ok": "",
      text: t("verify.no_crypto", { id: shoeId }) })]);
    return;
  }
  const seen = seenCommitments()[shoeId] || null;
  const result = await checkShoe(shoe, seen, shoeId, revealsOf(shoeId), headsOf(shoeId));
  show(() => [
    h("p", { class: `banner ${result.ok ? "banner--info" : "banner--bad"}`, "data-testid": "verify-result",
      "data-ok": String(result.ok), text: t(result.ok ? "verify.ok" : "verify.bad", { id: shoeId }) }),
    h("p", { class: "small" }, `${t("verify.commitment")}: `, h("code", { "data-testid": "verify-commitment", text: shoe.commitment })),
    h("ul", { class: "verify-checks" },
      ...result.checks.map((c) => h("li", { "data-testid": "verify-check", "data-check": c.key, "data-ok": String(c.ok) },
        `${c.ok ? "✓" : "✗"} ${t(c.key, c.params)}`)),
      ...(result.seen ? [] : [h("li", { class: "muted", text: `• ${t("verify.check.unseen")}` })])),
    h("ol", { class: "verify-rounds" }, ...result.rounds.map(({ round, ok, problems }) => h("li", {
      "data-testid": "verify-round", "data-round-id": round.round_id, "data-ok": String(ok) },
    `${t("verify.round", { n: round.round_no })}: `,
    round.state === "settled"
      ? HANDS.map((k) => `${spotName(k)} ${(round.cards && round.cards[k] || []).join(" ")}`).join(" · ")
      : `${t("verify.cancelled", { n: round.dealt })}: ${HANDS.map((k) => `${spotName(k)} ${(round.cards && round.cards[k] || []).join(" ")}`).join(" · ")}`,
    ` — ${ok ? t("verify.round_ok") : `${t("verify.round_bad")} (${problems.map((p) => (HANDS.includes(p) ? spotName(p) : p)).join(", ")})`}`))),
  ]);
}

if (document.body && document.body.classList.contains("page--verify")) page();
