// The Bet Record's date filters in the page's language. A native <input type="date"> shows
// its date in the browser's locale, not the page's: a Thai or Hindi page said mm/dd/yyyy.
// So the field is text: it shows and reads the date as the page's locale writes it
// (th-TH: 4/12/2569, Buddhist era; hi-IN: 4/12/2026; en-US: 12/4/2026), accepts ISO
// (2026-12-04) too, and keeps the ISO date in data-iso for the filter.

import { moneyLocale } from "./common.js";
import { onLangChange } from "./i18n.js";

const SAMPLE = new Date(2006, 10, 22);  // day 22, month 11, year 2006: tells the order apart

/** Day, month and year in the order the locale writes them, e.g. ["d", "m", "y"]. */
function order() {
  return new Intl.DateTimeFormat(moneyLocale(), { day: "numeric", month: "numeric", year: "numeric" })
    .formatToParts(SAMPLE).filter((p) => ["day", "month", "year"].includes(p.type)).map((p) => p.type[0]);
}

function show(iso) {
  if (!iso) return "";
  const [y, m, d] = iso.split("-").map(Number);
  return new Date(y, m - 1, d).toLocaleDateString(moneyLocale(), { day: "numeric", month: "numeric", year: "numeric" });
}

/** The ISO date of what was typed (the locale's way or ISO), or "" if it is no date. */
export function parse(text) {
  const s = (text || "").trim();
  if (!s) return "";
  let y; let m; let d;
  const iso = /^(\d{4})-(\d{1,2})-(\d{1,2})$/.exec(s);
  if (iso) [y, m, d] = iso.slice(1).map(Number);
  else {
    const nums = (s.match(/\d+/g) || []).map(Number);
    if (nums.length !== 3) return "";
    const at = Object.fromEntries(order().map((k, i) => [k, nums[i]]));
    [y, m, d] = [at.y, at.m, at.d];
    if (moneyLocale() === "th-TH" && y > 2400) y -= 543;  // the Buddhist era
  }
  const date = new Date(y, m - 1, d);
  if (date.getFullYear() !== y || date.getMonth() !== m - 1 || date.getDate() !== d) return "";
  return `${y}-${String(m).padStart(2, "0")}-${String(d).padStart(2, "0")}`;
}

/** Make `input` a date field in the page's locale. */
export function dateField(input) {
  const placeholder = () => order().map((k) => ({ d: "dd", m: "mm", y: "yyyy" })[k]).join("/");
  const sync = () => {
    const iso = parse(input.value);
    input.dataset.iso = iso;
    input.setAttribute("aria-invalid", input.value.trim() && !iso ? "true" : "false");
  };
  input.type = "text";
  input.inputMode = "numeric";
  input.placeholder = placeholder();
  input.addEventListener("input", sync);
  input.addEventListener("change", () => { sync(); if (input.dataset.iso) input.value = show(input.dataset.iso); });
  onLangChange(() => { input.placeholder = placeholder(); if (input.dataset.iso) input.value = show(input.dataset.iso); });
  sync();
}
