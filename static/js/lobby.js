// The lobby: every table with its phase, countdown, players online, who deals and a small
// roadmap, kept live by one viewer websocket per table (no token: viewers need none; the
// server's presence frames bring the count), with the HTTP list as the starting point and
// as the fallback while a socket is down.

import { t, onLangChange } from "./i18n.js";
import { $, h, tName, money, initPage, connectionBadge } from "./common.js";
import { Connection } from "./conn.js";
import { serverNow } from "./clock.js";
import { fromSnapshot, applyEvent } from "./state.js";
import { renderRoadmap } from "./roadmap.js";
import { getJSON } from "./api.js";
import { tableView, renderView, renderDealer, limitsText, useTermsCurrency, STILL_EVERY_MS } from "./tables.js";

const MAX_LIVE = 12;
const POLL_MS = 5000;
const tables = new Map(); // id → {st, conn, el}

async function main() {
  initPage({ active: "lobby" });
  useTermsCurrency();  // limits in the player's currency, when a table page learnt it
  onLangChange(() => { for (const id of tables.keys()) renderCard(id); });
  await refresh();
  setInterval(tick, 250);
  setInterval(() => {  // the videos' stills, refreshed
    for (const [id, e] of tables) if (e.stream) renderView(e.el.querySelector(".lobby-view"), id, e.st, true);
  }, STILL_EVERY_MS);
  setInterval(() => { if ([...tables.values()].some((x) => !x.conn || !x.conn.online)) refresh(); }, POLL_MS);
}

async function refresh() {
  const status = $("#lobby-status");
  let list;
  try {
    list = (await getJSON("/api/tables")).tables || [];
  } catch {
    status.textContent = t("lobby.error");
    return;
  }
  status.textContent = list.length ? "" : t("lobby.empty");
  for (const snap of list) {
    let entry = tables.get(snap.id);
    if (!entry) {
      entry = { st: fromSnapshot(snap), conn: null, el: null };
      tables.set(snap.id, entry);
      entry.el = buildCard(snap.id);
      $("#lobby").append(entry.el);
      if (tables.size <= MAX_LIVE) watch(snap.id, entry);
    } else if (!entry.conn || !entry.conn.online) {
      entry.st = fromSnapshot(snap);
    }
    entry.stream = Boolean(snap.stream && snap.stream.hls);
    renderCard(snap.id);
  }
}

function watch(id, entry) {
  const conn = new Connection({ path: "/ws", table: id });
  entry.conn = conn;
  conn.addEventListener("welcome", (e) => {
    if (!e.detail.msg.resumed) entry.st = fromSnapshot(e.detail.msg.table);
    entry.dealer = e.detail.msg.dealer || null;  // who deals (not part of the snapshot)
    renderCard(id);
  });
  conn.addEventListener("event", (e) => { applyEvent(entry.st, e.detail); renderCard(id); });
  conn.addEventListener("message", (e) => {
    if (e.detail.type === "dealer_changed") {
      entry.dealer = { name: e.detail.name, photo: e.detail.photo || null };
    } else if (e.detail.type === "presence") {
      entry.online = e.detail.online;  // counting this lobby's own viewer connection
    } else return;
    renderCard(id);
  });
  conn.addEventListener("state", (e) => { entry.connState = e.detail.state; renderBadge(entry); });
  conn.start();
}

function buildCard(id) {
  const badge = connectionBadge().cloneNode(true);
  badge.removeAttribute("id");
  badge.setAttribute("data-testid", `lobby-conn-${id}`);
  badge.removeAttribute("role");
  return h("article", { class: "lobby-card", "data-testid": `lobby-table-${id}`, "data-table": id },
    h("div", { class: "lobby-card__head" },
      h("h2", { class: "lobby-card__name" }),
      h("span", { class: "countdown", "data-testid": `lobby-countdown-${id}`, role: "timer" })),
    tableView(id),
    h("div", { class: "lobby-card__meta" },
      h("span", { class: "phase", "data-testid": `lobby-phase-${id}` }),
      h("span", { class: "lobby-card__round" }),
      h("span", { class: "lobby-card__limits" }),
      badge),
    h("div", { class: "lobby-card__meta" },
      h("span", { class: "online lobby-card__online", "data-testid": `lobby-online-${id}`, hidden: true }),
      h("span", { class: "lobby-card__dealer", "data-testid": `lobby-dealer-${id}` })),
    h("div", { class: "lobby-card__roadmap", "data-testid": `lobby-roadmap-${id}` }),
    h("a", { class: "btn btn--primary", href: `table.html?table=${encodeURIComponent(id)}`,
      "data-testid": `join-${id}` }));
}

function renderCard(id) {
  const { st, el } = tables.get(id);
  el.querySelector(".lobby-card__name").textContent = st.name;
  const phase = el.querySelector(".phase");
  phase.textContent = t(`phase.${st.phase}`);
  phase.dataset.phase = st.phase;
  el.querySelector(".lobby-card__round").textContent = st.round_no ? t("table.round", { n: st.round_no }) : "";
  el.querySelector(".lobby-card__limits").textContent = limitsText(st);
  renderRoadmap(el.querySelector(".lobby-card__roadmap"), st.roadmap, { limit: 14, compact: true });
  const entry = tables.get(id);
  const online = el.querySelector(".lobby-card__online");
  online.hidden = typeof entry.online !== "number";
  online.dataset.online = online.hidden ? "" : String(entry.online);
  if (!online.hidden) online.textContent = t("lobby.online", { n: money(entry.online) });
  // who deals: the presenter signed in at the console, else how the table is dealt
  const who = el.querySelector(".lobby-card__dealer");
  who.classList.toggle("presenter", Boolean(entry.dealer));
  who.replaceChildren(...(entry.dealer ? tName("chat.dealing", entry.dealer.name)
    : [st.mode === "manual" ? t("mode.manual") : t("lobby.auto_dealer")]));
  renderDealer(who, entry.dealer);
  renderView(el.querySelector(".lobby-view"), id, st, entry.stream);
  renderBadge(tables.get(id));
  const join = el.querySelector("a.btn");
  join.textContent = t("lobby.join");
  join.setAttribute("aria-label", t("lobby.join_aria", { name: st.name }));
  tickOne(id);
}

/** A table's connection badge, in the page's language (re-rendered when it changes). */
function renderBadge(entry) {
  const badge = entry.el.querySelector(".conn");
  const state = entry.connState || "idle";
  badge.dataset.state = state;
  badge.querySelector(".conn__text").textContent = t(`conn.${state}`);
}

function tickOne(id) {
  const { st, el } = tables.get(id);
  const cd = el.querySelector(".countdown");
  if (st.phase === "betting" && st.closes_at) {
    const ms = Math.max(0, st.closes_at - serverNow());
    cd.textContent = ms > 0 ? t("countdown.seconds", { s: Math.ceil(ms / 1000) }) : t("countdown.closing");
    cd.dataset.state = ms > 0 && ms <= 5000 ? "urgent" : ms > 0 ? "open" : "closed";
    cd.dataset.remainingMs = String(Math.round(ms));
  } else {
    cd.textContent = "";
    cd.dataset.state = "closed";
    cd.dataset.remainingMs = "0";
  }
}

function tick() { for (const id of tables.keys()) tickOne(id); }

main();
