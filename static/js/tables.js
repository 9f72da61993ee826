// Many tables. On the table: switch to another table without going back to the lobby (the
// session — a launched player's token, a guest's — goes along: it is this tab's, not the
// table's). In the lobby: each table's picture — a still of its video, grabbed by the
// server and refreshed (GET /api/tables/{id}/still.jpg), or, without a video, the table
// drawn from its state — who deals, with their photo, and the limits in the player's
// currency (what the table page learnt from the session's welcome: an operator's limits
// for the session's currency, kept for this tab).

import { t, onLangChange } from "./i18n.js";
import { h, money, setCurrency } from "./common.js";
import { getJSON } from "./api.js";
import { HANDS } from "./state.js";

const TERMS_KEY = "livetable.terms";
export const STILL_EVERY_MS = 10_000;

// ------------------------------------------------------------------ the table page

/** A "switch table" list in the table's bar; remember the session's terms for the lobby. */
export function mountTableSwitch(conn, bar, currentId) {
  const select = h("select", { class: "table-switch", id: "table-switch", "data-testid": "table-switch",
    "aria-label": t("tables.switch"), title: t("tables.switch") });
  select.addEventListener("change", () => {
    if (select.value && select.value !== currentId()) {
      location.assign(`table.html?table=${encodeURIComponent(select.value)}`);
    }
  });
  bar.prepend(select);
  const fill = async () => {
    let list = [];
    try { list = (await getJSON("/api/tables")).tables || []; } catch { /* the lobby still works */ }
    select.hidden = list.length < 2;
    select.replaceChildren(...list.map((s) => h("option", { value: s.id, selected: s.id === currentId(),
      text: `${s.name || s.id} · ${t(`phase.${s.phase}`)}` })));
  };
  select.addEventListener("focus", fill);  // fresh phases when opened
  conn.addEventListener("welcome", (e) => {
    const p = e.detail.msg.player;
    try {
      if (p) sessionStorage.setItem(TERMS_KEY, JSON.stringify({ currency: p.currency || null, limits: p.limits || null }));
    } catch { /* private mode: the table's own limits then */ }
  });
  onLangChange(() => { select.setAttribute("aria-label", t("tables.switch")); select.title = t("tables.switch"); fill(); });
  fill();
}

// ------------------------------------------------------------------ the lobby

/** The player's terms as the table page kept them (null: a viewer, or none yet). */
export function playerTerms() {
  try { return JSON.parse(sessionStorage.getItem(TERMS_KEY) || "null"); } catch { return null; }
}

/** Money in the player's currency from here on (the lobby's limits). */
export function useTermsCurrency() {
  const terms = playerTerms();
  if (terms && terms.currency) setCurrency(terms.currency);
}

/** The limits a card shows: the player's own for their currency, else the table's. */
export function limitsText(st) {
  const terms = playerTerms();
  const lim = (terms && terms.limits) || st.limits;
  return t("lobby.limits", { min: money(lim.min), max: money(lim.max) });
}

/** A card's picture: a still of the video (refreshed) or the table drawn. */
export function tableView(id) {
  return h("div", { class: "lobby-view", "data-testid": `lobby-view-${id}` },
    h("img", { class: "lobby-view__still", "data-testid": `lobby-still-${id}`, alt: "", hidden: true }),
    h("div", { class: "lobby-view__drawn", "data-testid": `lobby-drawn-${id}` }));
}

/** Draw `el` (a tableView) for the table `st`; `stream`: whether it has a video. */
export function renderView(el, id, st, stream) {
  const img = el.querySelector("img");
  const drawn = el.querySelector(".lobby-view__drawn");
  if (stream && !img.dataset.failed) {
    const due = !img.dataset.at || Date.now() - Number(img.dataset.at) >= STILL_EVERY_MS;
    if (due) {
      img.dataset.at = String(Date.now());
      img.onload = () => { img.hidden = false; drawn.hidden = true; };
      img.onerror = () => { img.dataset.failed = "1"; img.hidden = true; drawn.hidden = false; };
      img.src = `/api/tables/${encodeURIComponent(id)}/still.jpg?at=${img.dataset.at}`;
    }
    img.alt = t("tables.still", { name: st.name });
  } else {
    img.hidden = true;
    drawn.hidden = false;
  }
  if (drawn.hidden) return;
  const res = Object.fromEntries((st.results || []).map((r) => [r.hand, r]));
  drawn.replaceChildren(...HANDS.map((hand) => {
    const shown = st.hands[hand];
    const r = res[hand];
    const cls = `mini-hand${r ? ` mini-hand--${r.outcome}` : ""}${hand === "BANKER" ? " mini-hand--banker" : ""}`;
    const label = hand === "BANKER" ? "B" : hand;
    const value = shown ? String(shown.value) : "•".repeat(Math.min(2, st.dealt[hand] || 0));
    return h("span", { class: cls, "data-hand": hand }, h("b", { text: label }), h("span", { text: value }));
  }));
  drawn.setAttribute("aria-label", t("tables.drawn", { name: st.name, phase: t(`phase.${st.phase}`) }));
  drawn.setAttribute("role", "img");
}

/** Who deals, with their photo when the console gave one. */
export function renderDealer(el, dealer) {
  let photo = el.querySelector(".presenter__photo");
  if (dealer && dealer.photo) {
    if (!photo) { photo = h("img", { class: "presenter__photo", alt: "" }); el.prepend(photo); }
    if (photo.getAttribute("src") !== dealer.photo) photo.src = dealer.photo;
  } else if (photo) photo.remove();
}
