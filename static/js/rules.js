// The rules page: the whole rules sheet, in the page's language.
//
// The sheet's words live in static/sheet/<lang>.html, one file per language, fetched for the
// current language only (and again when the language changes): they are a document, not UI
// strings, so they stay out of the i18n dictionaries. This module only adds what is not
// words: drawn cards where the sheet names cards (data-cards), the roadmap symbols
// (data-roadmap), the table of contents, and the table limits, which come from the server
// (GET /api/tables) because an operator sets them per table.
//
// The worked examples are data in the sheet (data-spot, data-amount, data-cards, and the
// amounts it shows in [data-field] elements); tests/e2e/test_rules_page.py computes each one
// with livetable.rules, so a sheet that says something the server does not pay fails a test.

import { lang, onLangChange } from "./i18n.js";
import { $, $$, h, money, setCurrency, initPage } from "./common.js";
import { keptLimits } from "./session.js";
import { cardEl } from "./cards.js";
import { roadmapCell } from "./roadmap.js";
import { getJSON } from "./api.js";

const SHEET_LANGS = new Set(["en", "th", "hi"]);
const fetched = new Map(); // lang → Promise<string>: a language switched back is not refetched

function sheetText(code) {
  if (!fetched.has(code)) {
    const p = fetch(`sheet/${code}.html`, { headers: { Accept: "text/html" } }).then((r) => {
      if (!r.ok) throw new Error(`sheet/${code}.html: ${r.status} ${r.statusText}`);
      return r.text();
    });
    p.catch(() => fetched.delete(code)); // a failed fetch is retried on the next render
    fetched.set(code, p);
  }
  return fetched.get(code);
}

let limitsPromise = null;
function tableLimits() {
  if (!limitsPromise) {
    limitsPromise = getJSON("/api/tables").then((r) => r.tables || []);
    limitsPromise.catch(() => { limitsPromise = null; });
  }
  return limitsPromise;
}

let renderSeq = 0;

async function render() {
  const seq = ++renderSeq;
  const code = SHEET_LANGS.has(lang()) ? lang() : "en";
  const main = $("#main");
  main.setAttribute("aria-busy", "true");
  let text;
  try {
    text = await sheetText(code);
  } catch (err) {
    if (seq !== renderSeq) return;
    main.removeAttribute("aria-busy");
    main.replaceChildren(h("p", { class: "banner banner--bad", "data-testid": "sheet-error", role: "alert" },
      "The rules could not be loaded. Reload the page to try again. · ",
      "โหลดกติกาไม่สำเร็จ โปรดโหลดหน้าใหม่ · नियम लोड नहीं हो सके, पेज फिर से लोड करें।"));
    console.warn(err);
    return;
  }
  if (seq !== renderSeq) return; // the language changed while this one was loading
  const tpl = document.createElement("template");
  tpl.innerHTML = text; // our own static file, same origin
  const sheet = tpl.content.querySelector("article.sheet");
  drawCards(sheet);
  drawRoadmapSymbols(sheet);
  fillToc(sheet);
  const hash = location.hash;
  main.replaceChildren(sheet);
  main.removeAttribute("aria-busy");
  // The sheet arrived after the browser looked for the #fragment: scroll to it now (once;
  // a language switch keeps the reader where they are).
  if (seq === 1 && hash.length > 1) document.getElementById(decodeURIComponent(hash.slice(1)))?.scrollIntoView();
  await fillLimits(sheet, seq);
}

/** Replace every [data-cards="4H 8C"] span's text with drawn cards. */
function drawCards(root) {
  for (const el of $$(".cards-inline[data-cards]", root)) {
    const cards = el.dataset.cards.split(/\s+/).filter(Boolean);
    el.replaceChildren(...cards.map((c) => cardEl(c, { small: true })));
  }
}

function drawRoadmapSymbols(root) {
  const symbols = {
    win: { outcome: "win" }, lose: { outcome: "lose" }, tie: { outcome: "tie" },
    flush: { outcome: "legend", flush: true }, pair: { outcome: "legend", pair: true },
  };
  for (const el of $$("[data-roadmap]", root)) {
    const cell = roadmapCell(symbols[el.dataset.roadmap], null);
    cell.setAttribute("aria-hidden", "true");
    el.replaceChildren(cell);
  }
}

function fillToc(root) {
  const list = $("[data-toc]", root);
  if (!list) return;
  list.replaceChildren(...$$("section[id] > h2", root).map((h2) =>
    h("li", {}, h("a", { href: `#${h2.parentElement.id}`, text: h2.textContent }))));
}

/**
 * Fill the limits table from GET /api/tables. Tables with the same limits share one table;
 * tables with different limits get one each, captioned with their names.
 */
async function fillLimits(root, seq) {
  const template = $("table.limits", root);
  const error = $("[data-limits-error]", root);
  if (!template) return;
  let tables;
  try {
    tables = await tableLimits();
  } catch (err) {
    if (seq !== renderSeq) return;
    error.hidden = false;
    template.closest(".table-wrap").hidden = true;
    console.warn("limits:", err);
    return;
  }
  if (seq !== renderSeq) return;
  // An operator's player (this tab's session): the limits their bets are held to, in
  // their currency, as the table page showed them — not the table's bare numbers.
  const session = keptLimits();
  if (session) {
    setCurrency(session.currency);
    if (session.limits) tables = tables.map((tb) => ({ ...tb, limits: { ...tb.limits, ...session.limits } }));
  }
  const groups = new Map();
  for (const tb of tables) {
    const key = JSON.stringify(tb.limits);
    if (!groups.has(key)) groups.set(key, { limits: tb.limits, names: [] });
    groups.get(key).names.push(tb.name || tb.id);
  }
  if (!groups.size) {
    error.hidden = false;
    template.closest(".table-wrap").hidden = true;
    return;
  }
  const wrap = template.closest(".table-wrap");
  const copies = [...groups.values()].map(({ limits, names }, i) => {
    const table = i === 0 ? template : template.cloneNode(true);
    for (const cell of $$("[data-key]", table)) {
      const v = limits[cell.dataset.key];
      cell.dataset.value = String(v);
      cell.textContent = money(v);
    }
    const caption = $("[data-limits-caption]", table);
    caption.textContent = names.join(", ");
    caption.hidden = false;
    table.dataset.tables = names.join(",");
    if (i === 0) return wrap;
    const w = wrap.cloneNode(false);
    w.append(table);
    return w;
  });
  wrap.after(...copies.slice(1));
}

initPage({ active: "rules" });
render();
onLangChange(render);
