// Every user-visible string of the browser side, in English, Thai and Hindi — one language
// at a time.
//
// The dictionaries live in js/i18n/<lang>.js, one file per language with the strings of
// every page. A page downloads only its language: this module loads js/i18n/<lang>.js with a
// top-level await, so every module that imports it sees the strings ready, and t() stays
// synchronous. Switching language loads the other dictionary first, then tells the
// listeners. All files have the same keys (tests/e2e checks it), so there is no fallback
// language to download: a missing key shows as itself. (The rules sheet is a document, not
// UI strings: static/sheet/<lang>.html, fetched by rules.js for its language.)
//
// The terms follow the project's rules sheets (seeds 000, 002, 003): Thai
// เพลย์เยอร์ / แบงค์เกอร์ / คู่ / อัตราเด้ง, Hindi प्लेयर / बैंकर / जोड़ा / ऑड्स / रोकी गई राशि.
// The chosen language is kept in localStorage and set on <html lang>.
//
// Markup uses data-i18n="key" (text), data-i18n-aria="key" (aria-label),
// data-i18n-title, data-i18n-placeholder; code uses t("key", {param}).

const STORE_KEY = "livetable.lang";
export const LANGS = [["en", "English"], ["th", "ไทย"], ["hi", "हिन्दी"]];
const CODES = new Set(LANGS.map(([code]) => code));

const listeners = new Set();
let current = pickInitial();
let strings = await load(current);

function pickInitial() {
  // A session an operator launched names its language in the URL fragment (operator.js):
  // the page opens in it, its strings loaded before the first paint, not switched to
  // once the page had drawn itself in another.
  const launched = new URLSearchParams(location.hash.slice(1)).get("lang");
  if (launched && CODES.has(launched)) {
    try { localStorage.setItem(STORE_KEY, launched); } catch { /* private mode */ }
    return launched;
  }
  let saved = null;
  try { saved = localStorage.getItem(STORE_KEY); } catch { /* private mode */ }
  if (saved && CODES.has(saved)) return saved;
  for (const l of navigator.languages || [navigator.language || "en"]) {
    const code = String(l).slice(0, 2).toLowerCase();
    if (CODES.has(code)) return code;
  }
  return "en";
}

/** The strings of `code`. */
async function load(code) {
  return (await import(`./i18n/${code}.js`)).default;
}

export function lang() { return current; }

/** Translate `key`, filling {params}. A key with no string shows as the key itself. */
export function t(key, params) {
  let s = strings[key];
  if (s === undefined) return key;
  if (params) s = s.replace(/\{(\w+)\}/g, (m, k) => (params[k] === undefined ? m : String(params[k])));
  return s;
}

/** Switch language: the new strings are loaded before any listener runs. */
export async function setLang(code) {
  if (!CODES.has(code) || code === current) return;
  const next = await load(code);
  current = code;
  strings = next;
  try { localStorage.setItem(STORE_KEY, code); } catch { /* private mode */ }
  document.documentElement.lang = code;
  for (const cb of listeners) cb(code);
}

export function onLangChange(cb) { listeners.add(cb); return () => listeners.delete(cb); }

/** Translate the marked-up strings under `root` and set <html lang>. */
export function applyI18n(root = document) {
  document.documentElement.lang = current;
  const titleKey = document.body && document.body.dataset.title;
  if (titleKey) document.title = `${t(titleKey)} — ${t("app.name")}`;
  for (const el of root.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of root.querySelectorAll("[data-i18n-aria]")) el.setAttribute("aria-label", t(el.dataset.i18nAria));
  for (const el of root.querySelectorAll("[data-i18n-title]")) el.title = t(el.dataset.i18nTitle);
  for (const el of root.querySelectorAll("[data-i18n-placeholder]")) el.placeholder = t(el.dataset.i18nPlaceholder);
}
