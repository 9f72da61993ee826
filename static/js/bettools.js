// Betting tools beside Rebet and Double: the selected chip on all five Players in one tap,
// and up to five favourite layouts, kept in this browser (localStorage) for the session's
// currency — a layout saved in baht is not offered to a yen session. A favourite is put
// down as the draft (it replaces the chips not yet confirmed), judged and confirmed like
// any other draft: the page's checks first (balance, limits), the server's on Confirm.

import { t, onLangChange } from "./i18n.js";
import { $, h, money, spotName } from "./common.js";
import { POSITIONS, SPOTS } from "./state.js";

export const MOST_FAVOURITES = 5;
const KEY = "livetable.favourites";

let tools = null;   // table.js's view of the draft: see mountBetTools

/**
 * Mount the tools in the bet bar. `betting`: {chip(), canBet(), layout(), setDraft(layout),
 * draft(), currency(), refuse()} — table.js's draft, read and replaced through it.
 */
export function mountBetTools(betbar, betting) {
  tools = betting;
  const row = h("div", { class: "bettools", id: "bettools", "data-testid": "bettools" },
    h("button", { type: "button", class: "btn", id: "btn-all-players", "data-testid": "all-players",
      onclick: allPlayers }),
    h("button", { type: "button", class: "btn", id: "btn-save-layout", "data-testid": "save-layout",
      onclick: save }),
    h("div", { class: "bettools__favs", id: "favourites", "data-testid": "favourites" }));
  const actions = betbar.querySelector(".actions");
  actions.after(row);
  onLangChange(renderBetTools);
  renderBetTools();
}

/** The favourites of this session's currency. */
export function favourites() {
  try {
    const all = JSON.parse(localStorage.getItem(KEY) || "{}");
    const list = all[tools.currency() || "-"];
    return Array.isArray(list) ? list.filter(valid).slice(0, MOST_FAVOURITES) : [];
  } catch { return []; }
}

function valid(layout) {
  return layout && typeof layout === "object" && Object.keys(layout).length > 0
    && Object.entries(layout).every(([s, a]) => SPOTS.includes(s) && Number.isInteger(a) && a > 0);
}

function store(list) {
  let all = {};
  try { all = JSON.parse(localStorage.getItem(KEY) || "{}") || {}; } catch { /* a bad copy: start again */ }
  all[tools.currency() || "-"] = list;
  try { localStorage.setItem(KEY, JSON.stringify(all)); } catch { /* private mode: this page only */ }
}

function allPlayers() {
  if (!tools.canBet()) { tools.refuse(); return; }
  const next = { ...tools.draft() };
  for (const p of POSITIONS) next[p] = (next[p] || 0) + tools.chip();
  tools.setDraft(next);
}

function save() {
  const layout = tools.layout();
  if (!valid(layout)) return;
  const list = favourites();
  const same = (a, b) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());
  if (list.length >= MOST_FAVOURITES || list.some((f) => same(f, layout))) return;
  store([...list, layout]);
  renderBetTools();
}

function use(layout) {
  if (!tools.canBet()) { tools.refuse(); return; }
  tools.setDraft({ ...layout });
}

function forget(index) {
  const list = favourites();
  list.splice(index, 1);
  store(list);
  renderBetTools();
}

/** A layout in words: "Player 1 100 · Pair 3 50". */
export function layoutText(layout) {
  return SPOTS.filter((s) => layout[s]).map((s) => `${spotName(s)} ${money(layout[s])}`).join(" · ");
}

/** A favourite's face, short: "P1–P5 50", "P1 100 P3p 10". */
function shortText(layout) {
  const spots = SPOTS.filter((s) => layout[s]);
  const same = spots.length === POSITIONS.length && POSITIONS.every((p) => layout[p] === layout.P1);
  if (same) return `P1–P5 ${money(layout.P1)}`;
  return spots.map((s) => `${s.replace("_PAIR", "p")} ${money(layout[s])}`).join(" ");
}

/** Enable what can be done now (table.js calls it on every render). */
export function renderBetTools() {
  if (!tools) return;
  const open = tools.canBet();
  const list = favourites();
  const all = $("#btn-all-players");
  all.textContent = t("tools.all_players");
  all.disabled = !open || !tools.chip();
  const saveBtn = $("#btn-save-layout");
  const full = list.length >= MOST_FAVOURITES;
  saveBtn.textContent = t("tools.save");
  saveBtn.disabled = full || !valid(tools.layout());
  saveBtn.title = full ? t("tools.full", { n: MOST_FAVOURITES }) : t("tools.save_title");
  const box = $("#favourites");
  const sig = JSON.stringify(list) + open + document.documentElement.lang;
  if (box.dataset.sig === sig) return;
  box.dataset.sig = sig;
  box.dataset.count = String(list.length);
  box.replaceChildren(...list.map((layout, i) => h("span", { class: "fav", "data-testid": `favourite-${i}` },
    h("button", { type: "button", class: "btn fav__use", disabled: !open,
      "aria-label": t("tools.use", { layout: layoutText(layout) }), title: layoutText(layout),
      text: `★ ${shortText(layout)}`, onclick: () => use(layout) }),
    h("button", { type: "button", class: "btn fav__forget", "data-testid": `forget-${i}`,
      "aria-label": t("tools.forget", { layout: layoutText(layout) }), text: "×",
      onclick: () => forget(i) }))));
}
