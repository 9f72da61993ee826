// What every page shares: the header (brand, navigation, language switch), the
// connection badge, number formatting and the aria-live announcer.

import { t, lang, setLang, LANGS, applyI18n, onLangChange } from "./i18n.js";

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

/** t(key) with its {name} in a <bdi>: a player's or dealer's name, isolated so that a
 *  right-to-left name cannot reorder the sentence around it (a list of nodes for h()). */
export function tName(key, name, vars = {}) {
  const mark = "\u0000";
  const [before, after = ""] = t(key, { ...vars, name: mark }).split(mark);
  return [before, h("bdi", { text: name }), after];
}

// A session an operator launched plays in a currency (ISO 4217); every amount on the wire
// is an integer in its minor unit. money() then shows it as that currency for the page's
// language — ฿1,000.00 for 100000 THB, ¥1,000 for 1000 JPY, ₹1,000.00 for 100000 INR — with
// the currency's decimals as the browser's Intl data has them (ISO 4217's). Demo guests and
// ledger players without a currency keep plain numbers.
let currency = null;

/** The session's currency code (null: plain amounts). */
export function setCurrency(code) {
  currency = null;
  if (!code) return;
  try { new Intl.NumberFormat("en", { style: "currency", currency: code }); currency = code; }
  catch { /* not a currency this browser knows: plain amounts */ }
}

export function moneyLocale() {
  return lang() === "en" ? "en-US" : lang() === "th" ? "th-TH" : "hi-IN";
}

function currencyFormat() {
  return new Intl.NumberFormat(moneyLocale(), { style: "currency", currency, currencyDisplay: "narrowSymbol" });
}

/** The session currency's minor-unit digits (0 without a currency). */
export function currencyDecimals() {
  return currency ? currencyFormat().resolvedOptions().maximumFractionDigits : 0;
}

export function money(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "—";
  if (!currency) return Number(n).toLocaleString(moneyLocale());
  return currencyFormat().format(Number(n) / 10 ** currencyDecimals());
}

// A currency without a symbol of its own (KWD, AED…) is written with its code, "KWD 5":
// too wide for a chip (the label was cut) or a stake pill (it wrapped) on a phone. There the
// amount stands alone; the balance beside them says the currency.
function withoutCode(format, n) {
  const parts = format.formatToParts(n);
  const cur = parts.find((x) => x.type === "currency");
  if (!cur || cur.value.length <= 2) return parts.map((x) => x.value).join("");
  return parts.filter((x) => x.type !== "currency").map((x) => x.value).join("").trim();
}

/** A chip's face in the session's currency, short: ฿10, ฿2.5K, ¥1K, 5 for KWD (null without one). */
export function chipMoney(n) {
  if (!currency) return null;
  return withoutCode(new Intl.NumberFormat(moneyLocale(), { style: "currency", currency,
    currencyDisplay: "narrowSymbol", notation: "compact" }), Number(n) / 10 ** currencyDecimals());
}

/** An amount on a bet spot: money(), without a currency code that does not fit there. */
export function stakeMoney(n) {
  if (!currency) return money(n);
  return withoutCode(currencyFormat(), Number(n) / 10 ** currencyDecimals());
}

export function signed(n) { return (n > 0 ? "+" : n < 0 ? "−" : "") + money(Math.abs(n)); }

export function dateTime(ms) {
  if (!ms) return "—";
  const loc = lang() === "en" ? "en-GB" : lang() === "th" ? "th-TH" : "hi-IN";
  return new Date(ms).toLocaleString(loc, { dateStyle: "short", timeStyle: "medium" });
}

export function timeOfDay(d) {
  const loc = lang() === "en" ? "en-GB" : lang() === "th" ? "th-TH" : "hi-IN";
  return d.toLocaleTimeString(loc);
}

/** A position or spot name in the page's language: P3 → "Player 3", P3_PAIR → "Player 3 Pair". */
export function spotName(spot) {
  if (spot === "BANKER") return t("hand.banker");
  const n = spot.slice(1, 2);
  return spot.endsWith("_PAIR") ? t("spot.pair", { n }) : t("spot.player", { n });
}

/** "Special Pair (rank 7.4)", "9 Points", in the page's language. A special hand's name
 *  comes first: "7.1 Flush with No Point" read like a points value. */
export function handLabel(value) {
  const v = String(value);
  if (v.includes(".")) return `${t(`combo.${v}`)} (${t("combo.rank", { v })})`;
  return t(Number(v) === 1 ? "hand.point" : "hand.points", { n: v });
}

export function oddsText(odds) { return `${odds}:1`; }

/** Page header: brand, nav, language switch and (optionally) the connection badge. */
export function mountHeader({ active, connection = false, extra = null } = {}) {
  let header = $("header.site");
  if (!header) { header = h("header", { class: "site" }); document.body.prepend(header); }
  header.replaceChildren();
  const nav = h("nav", { class: "site__nav", "aria-label": t("nav.label"), "data-i18n-aria": "nav.label" },
    navLink("index.html", "nav.lobby", active === "lobby"),
    navLink("rules.html", "nav.rules", active === "rules"),
    navLink("records.html", "nav.records", active === "records"),
    // The dealer console is for the studio (its own URL), not a player's page.
    active === "dealer" ? navLink("dealer.html", "nav.dealer", true) : null,
  );
  const select = h("select", {
    id: "lang-switch", class: "lang", "data-testid": "lang-switch",
    "aria-label": t("lang.label"), "data-i18n-aria": "lang.label",
  });
  for (const [code, name] of LANGS) {
    const opt = h("option", { value: code, lang: code, text: name });
    if (code === lang()) opt.selected = true;
    select.append(opt);
  }
  select.addEventListener("change", () => setLang(select.value));
  const tools = h("div", { class: "site__tools" });
  if (extra) tools.append(extra);
  if (connection) tools.append(connectionBadge());
  tools.append(select);
  header.append(
    h("a", { class: "brand", href: "index.html" },
      h("span", { class: "brand__mark", "aria-hidden": "true" }, "♠♥"),
      h("span", { class: "brand__name", "data-i18n": "app.name", text: t("app.name") })),
    nav, tools);
  onLangChange(() => { select.value = lang(); });
  // The header sticks to the top: things that stick below it (the table's toasts) need its
  // height, which changes as the navigation wraps.
  if ("ResizeObserver" in self) {
    new ResizeObserver(() => {
      document.documentElement.style.setProperty("--header-h", `${header.offsetHeight}px`);
    }).observe(header);
  }
  return header;
}

function navLink(href, key, current) {
  return h("a", { href, "data-i18n": key, "aria-current": current ? "page" : null, text: t(key) });
}

/** The always-visible connection state. Feed it a Connection's "state" events. */
export function connectionBadge() {
  let badge = $("#conn-state");
  if (badge) return badge;
  badge = h("span", {
    id: "conn-state", class: "conn", "data-testid": "conn-state", "data-state": "idle",
    role: "status",
  }, h("span", { class: "conn__dot", "aria-hidden": "true" }), h("span", { class: "conn__text" }));
  renderBadge(badge, { state: "idle" });
  return badge;
}

let badgeInfo = { state: "idle" };
let badgeTimer = null;
function renderBadge(badge, info) {
  badge.dataset.state = info.state;
  let text = t(`conn.${info.state}`);
  if (info.state === "reconnecting" && info.retryAt) {
    const s = Math.max(0, Math.ceil((info.retryAt - Date.now()) / 1000));
    if (s > 0) text = t("conn.retry_in", { s });
  }
  badge.querySelector(".conn__text").textContent = text;
  badge.title = text;
}

// <body data-connection>: the connection as a person (or a test) would put it.
const CONNECTION = { online: "live", offline: "offline", fatal: "offline", closed: "offline" };

export function bindConnection(conn) {
  const badge = connectionBadge();
  let was = null;
  let lost = false;
  const update = (info) => {
    const now = CONNECTION[info.state] || "reconnecting";
    document.body.dataset.connection = now;
    if (now === "live" && lost) announce(t("conn.back"));
    if (now !== "live" && (was === "live" || (lost && was !== now))) {
      announce(t(now === "offline" ? "conn.lost_offline" : "conn.lost"), { urgent: true });
    }
    if (now === "live") lost = false;
    else if (was === "live") lost = true;
    was = now;
    badgeInfo = info;
    renderBadge(badge, info);
    clearInterval(badgeTimer);
    if (info.state === "reconnecting" && info.retryAt) {
      badgeTimer = setInterval(() => renderBadge(badge, badgeInfo), 500);
    }
  };
  conn.addEventListener("state", (e) => update(e.detail));
  onLangChange(() => renderBadge(badge, badgeInfo));
}

/** Announce through the page's aria-live regions (polite for results, assertive for errors). */
export function announce(text, { urgent = false } = {}) {
  const region = $(urgent ? "#live-alert" : "#live-polite");
  if (!region) return;
  region.textContent = "";
  // A fresh text node after a tick, so that screen readers announce a repeated message.
  setTimeout(() => { region.textContent = text; }, 30);
}

export function initPage({ active, connection = false } = {}) {
  applyI18n(document);
  mountHeader({ active, connection });
  onLangChange(() => applyI18n(document));
}

/** A count (players online, rounds): the page's number format, never money. */
export function count(n) { return Number(n).toLocaleString(moneyLocale()); }

/** A name as shown: a demo guest's "Guest 7QX2" (the server names guests in English) in the
 *  page's language; any other name as it is. */
export function displayName(name) {
  const m = /^Guest ([A-Za-z0-9_-]{4})$/.exec(name || "");
  return m ? t("guest.name", { id: m[1] }) : name;
}
