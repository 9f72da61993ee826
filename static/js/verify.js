// "Verify this shoe": the provably fair check (DESIGN §7) in the browser.
//
// When the server shuffles, shoe_started carries a commitment: SHA-256 of
// salt + ":" + cut_at + ":" + order.join(","). Once the shoe has ended, GET /api/shoes/{id}
// reveals the salt, the cut card and the order. This module
//   * remembers every commitment the page saw announced (localStorage), so that the check
//     can prove the order was fixed before the bets, not merely that the record agrees
//     with itself;
//   * checks a revealed shoe exactly as `livetable verify-shoe` does (livetable/rules/
//     fairness.py): the hash (crypto.subtle), 8 full decks, the opening card and its burns,
//     and every round's cards as the next slots of the order in the dealing order;
//   * renders verify.html?shoe=<id>, and offers links to it: on the table page when a shoe
//     ends, and in the Bet Record next to a bet whose shoe has ended.
// The pages call three small hooks: noteSnapshot(snapshot), noteTableEvent(ev) (table page)
// and verifyLink(shoeId) (Bet Record). Its strings are merged into i18n's dictionaries here,
// in the three languages, so that this module stays one file.

import { t, DICTS, onLangChange } from "./i18n.js";
import { $, h, spotName, initPage } from "./common.js";
import { getJSON } from "./api.js";

Object.assign(DICTS.en, {
  "verify.title": "Verify a shoe",
  "verify.intro": "Before the first bet of a shoe the server publishes a commitment: the SHA-256 of the whole shuffled order, its cut card and a secret salt. When the shoe ends it reveals them, and this page checks every card of every round against them, in your browser.",
  "verify.link": "Verify this shoe",
  "verify.ended": "Shoe {id} has ended:",
  "verify.loading": "Checking shoe {id}…",
  "verify.not_found": "Shoe {id} has not ended yet, or it was dealt from a physical shoe (those have no commitment). A shoe is revealed when it ends.",
  "verify.no_shoe": "No shoe given: open this page from a table or the Bet Record.",
  "verify.error": "The shoe could not be loaded.",
  "verify.no_crypto": "This browser cannot compute SHA-256 on this page (it needs HTTPS). Check the shoe with: livetable verify-shoe --url <server> {id}",
  "verify.ok": "Shoe {id} is verified: it was dealt exactly as committed.",
  "verify.bad": "Shoe {id} does NOT verify.",
  "verify.check.hash": "SHA-256 of salt:cut_at:order equals the commitment",
  "verify.check.seen": "The commitment is the one this browser saw when the shoe started",
  "verify.check.unseen": "This browser did not see the shoe start: the record is consistent, but compare the commitment with one announced before the bets",
  "verify.check.decks": "The order is 8 full decks (416 cards)",
  "verify.check.opening": "Opening card {card} shown face up, then {n} cards burned",
  "verify.check.rounds": "Every round was dealt from the next slots of the order: burn, then Player 1–5 and Banker, twice",
  "verify.check.cut": "No round was dealt after the round in which the cut card came out",
  "verify.commitment": "Commitment",
  "verify.round": "Round {n}",
  "verify.cancelled": "cancelled ({n} cards taken)",
  "verify.round_ok": "as committed",
  "verify.round_bad": "NOT as committed",
});
Object.assign(DICTS.th, {
  "verify.title": "ตรวจสอบชู",
  "verify.intro": "ก่อนการเดิมพันแรกของแต่ละชู เซิร์ฟเวอร์ประกาศค่าผูกมัด (SHA-256 ของลำดับไพ่ทั้งชูที่สับแล้ว ตำแหน่งไพ่ตัด และค่าเกลือลับ) เมื่อชูจบจะเปิดเผยทั้งหมด หน้านี้ตรวจไพ่ทุกใบของทุกรอบในเบราว์เซอร์ของคุณ",
  "verify.link": "ตรวจสอบชูนี้",
  "verify.ended": "ชู {id} จบแล้ว:",
  "verify.loading": "กำลังตรวจชู {id}…",
  "verify.not_found": "ชู {id} ยังไม่จบ หรือเป็นชูไพ่จริงของดีลเลอร์ (ไม่มีค่าผูกมัด) ชูจะถูกเปิดเผยเมื่อจบ",
  "verify.no_shoe": "ไม่ได้ระบุชู: เปิดหน้านี้จากโต๊ะหรือประวัติการเดิมพัน",
  "verify.error": "โหลดข้อมูลชูไม่ได้",
  "verify.no_crypto": "เบราว์เซอร์คำนวณ SHA-256 ในหน้านี้ไม่ได้ (ต้องใช้ HTTPS) ตรวจด้วยคำสั่ง: livetable verify-shoe --url <server> {id}",
  "verify.ok": "ชู {id} ผ่านการตรวจ: แจกไพ่ตรงตามที่ผูกมัดไว้ทุกใบ",
  "verify.bad": "ชู {id} ไม่ผ่านการตรวจ",
  "verify.check.hash": "SHA-256 ของ salt:cut_at:order ตรงกับค่าผูกมัด",
  "verify.check.seen": "ค่าผูกมัดตรงกับที่เบราว์เซอร์นี้เห็นตอนเริ่มชู",
  "verify.check.unseen": "เบราว์เซอร์นี้ไม่เห็นตอนเริ่มชู: ข้อมูลสอดคล้องกัน แต่ควรเทียบค่าผูกมัดกับที่ประกาศก่อนการเดิมพัน",
  "verify.check.decks": "ลำดับไพ่ครบ 8 สำรับ (416 ใบ)",
  "verify.check.opening": "เปิดไพ่ใบแรก {card} แล้วเผาไพ่ {n} ใบ",
  "verify.check.rounds": "ทุกรอบแจกจากช่องถัดไปของลำดับ: เผา 1 ใบ แล้วเพลย์เยอร์ 1–5 และแบงค์เกอร์ สองรอบ",
  "verify.check.cut": "ไม่มีรอบใดถูกแจกหลังรอบที่ไพ่ตัดออกมา",
  "verify.commitment": "ค่าผูกมัด",
  "verify.round": "รอบที่ {n}",
  "verify.cancelled": "ยกเลิก (ใช้ไพ่ {n} ใบ)",
  "verify.round_ok": "ตรงตามที่ผูกมัด",
  "verify.round_bad": "ไม่ตรงตามที่ผูกมัด",
});
Object.assign(DICTS.hi, {
  "verify.title": "शू की जाँच",
  "verify.intro": "शू के पहले दांव से पहले सर्वर एक प्रतिबद्धता प्रकाशित करता है: पूरे फेंटे गए क्रम, कट कार्ड और एक गुप्त नमक (salt) का SHA-256। शू खत्म होने पर वह इन्हें प्रकट करता है, और यह पेज आपके ब्राउज़र में हर राउंड का हर कार्ड जाँचता है।",
  "verify.link": "इस शू की जाँच करें",
  "verify.ended": "शू {id} खत्म हो गया:",
  "verify.loading": "शू {id} की जाँच हो रही है…",
  "verify.not_found": "शू {id} अभी खत्म नहीं हुआ, या वह डीलर के असली शू से बांटा गया (उनकी कोई प्रतिबद्धता नहीं होती)। शू खत्म होने पर प्रकट होता है।",
  "verify.no_shoe": "कोई शू नहीं दिया गया: यह पेज किसी टेबल या दांव रिकॉर्ड से खोलें।",
  "verify.error": "शू लोड नहीं हो सका।",
  "verify.no_crypto": "यह ब्राउज़र इस पेज पर SHA-256 नहीं निकाल सकता (HTTPS चाहिए)। जाँच करें: livetable verify-shoe --url <server> {id}",
  "verify.ok": "शू {id} सत्यापित है: हर कार्ड प्रतिबद्धता के अनुसार ही बांटा गया।",
  "verify.bad": "शू {id} सत्यापित नहीं होता।",
  "verify.check.hash": "salt:cut_at:order का SHA-256 प्रतिबद्धता के बराबर है",
  "verify.check.seen": "प्रतिबद्धता वही है जो इस ब्राउज़र ने शू शुरू होते समय देखी",
  "verify.check.unseen": "इस ब्राउज़र ने शू की शुरुआत नहीं देखी: रिकॉर्ड सुसंगत है, पर प्रतिबद्धता को दांव से पहले घोषित प्रतिबद्धता से मिलाएँ",
  "verify.check.decks": "क्रम में पूरे 8 डेक हैं (416 कार्ड)",
  "verify.check.opening": "पहला कार्ड {card} खुला दिखाया गया, फिर {n} कार्ड जलाए गए",
  "verify.check.rounds": "हर राउंड क्रम के अगले स्थानों से बांटा गया: एक जलाया, फिर प्लेयर 1–5 और बैंकर, दो बार",
  "verify.check.cut": "कट कार्ड निकलने वाले राउंड के बाद कोई राउंड नहीं बांटा गया",
  "verify.commitment": "प्रतिबद्धता",
  "verify.round": "राउंड {n}",
  "verify.cancelled": "रद्द ({n} कार्ड लिए गए)",
  "verify.round_ok": "प्रतिबद्धता के अनुसार",
  "verify.round_bad": "प्रतिबद्धता के अनुसार नहीं",
});

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

/** Hook: a table snapshot (welcome, lobby) — remember its shoe's commitment. */
export function noteSnapshot(snap) {
  if (snap) rememberCommitment(snap.shoe_id, snap.shoe_commitment);
}

/** Hook: a table event — remember commitments; when a shoe ends, offer to verify it. */
export function noteTableEvent(ev) {
  if (ev.type === "shoe_started") rememberCommitment(ev.shoe_id, ev.commitment);
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

/** A–9 burn their value, 10/J/Q/K burn ten (DESIGN §1). */
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

/**
 * Check a revealed shoe. Returns {ok, checks: [{key, ok, params}], rounds: [{round, ok,
 * problems}]} — the same rules as livetable/rules/fairness.py check_shoe.
 */
export async function checkShoe(shoe, seenCommitment) {
  const checks = [];
  const add = (key, ok, params = {}) => checks.push({ key, ok, params });
  const order = Array.isArray(shoe.order) ? shoe.order : [];
  const computed = await sha256Hex(`${shoe.salt}:${shoe.cut_at}:${order.join(",")}`);
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
    if (r.state === "settled" && dealt !== ROUND_CARDS) problems.push("cards taken");
    if (r.cards) {
      const slots = order.slice(at, at + Math.max(0, dealt));
      for (const [k, hand] of HANDS.entries()) {
        const want = [slots[1 + k], slots[7 + k]].filter((c) => c !== undefined);
        const got = r.cards[hand] || [];
        if (got.length !== want.length || got.some((c, j) => c !== want[j])) problems.push(hand);
      }
    }
    cutOut = cutOut || (at <= shoe.cut_at && shoe.cut_at < at + Math.max(0, dealt));
    over = cutOut;
    at += Math.max(0, dealt);
    rounds.push({ round: r, ok: problems.length === 0, problems });
  });
  add("verify.check.rounds", rounds.every((r) => r.ok));
  add("verify.check.cut", cutOk);
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
  const result = await checkShoe(shoe, seen);
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
      : t("verify.cancelled", { n: round.dealt }),
    ` — ${ok ? t("verify.round_ok") : `${t("verify.round_bad")} (${problems.map((p) => (HANDS.includes(p) ? spotName(p) : p)).join(", ")})`}`))),
  ]);
}

if (document.body && document.body.classList.contains("page--verify")) page();
