// Autoplay: the same layout for N rounds (at most 100), confirmed at each round's opening,
// with the player's stops: a loss limit (the net of the rounds played), a single round won
// by more than X, the balance under Y. It ends by itself on anything that is not a plain
// round: a refused bet or slip, an error, a reality check, the session's end, the
// connection lost, the table paused or a round cancelled. It is a convenience of this page,
// never an authority: every slip it sends is judged by the server like a tap on Confirm
// (balance, limits, the session's responsible-gaming limits), and the first refusal ends
// it — so it cannot outlive a session's limits.

import { t, onLangChange } from "./i18n.js";
import { $, h, money, currencyDecimals } from "./common.js";
import { deductedFor } from "./state.js";
import { layoutText } from "./bettools.js";

export const MOST_ROUNDS = 100;
// Placed a moment after round_opened: the table's own listeners open the round first.
const PLACE_AFTER_MS = 400;

let tools = null;     // table.js's betting view (see bettools.js)
let run = null;       // {layout, rounds, played, lossLimit, winOver, balanceUnder, net, rounds: {id: net}}
let ended = null;     // why the last run ended

/** Mount the Autoplay button (in the betting tools' row) and its form; follow `conn`. */
export function mountAutoplay(conn, betting) {
  tools = betting;
  const open = h("button", { type: "button", class: "btn", id: "btn-autoplay", "data-testid": "autoplay-open",
    onclick: () => showForm(true) });
  const status = h("span", { class: "autoplay-status", id: "autoplay-status", "data-testid": "autoplay-status",
    role: "status", hidden: true },
  h("span", { id: "autoplay-text" }),
  h("button", { type: "button", class: "btn", id: "autoplay-stop", "data-testid": "autoplay-stop",
    onclick: () => stop("stopped") }));
  $("#btn-save-layout").after(open, status);
  document.body.append(form());
  conn.addEventListener("event", (e) => onEvent(e.detail));
  conn.addEventListener("message", (e) => onMessage(e.detail));
  conn.addEventListener("fatal", (e) => stop(e.detail && e.detail.code === "session_ended"
    ? "session_ended" : "connection"));
  conn.addEventListener("state", () => { if (run && !conn.online) stop("connection"); });
  onLangChange(renderAutoplay);
  renderAutoplay();
}

function field(name, attrs) {
  return h("label", { class: "autoplay__field" }, h("span", { "data-i18n": `autoplay.${name}`, text: t(`autoplay.${name}`) }),
    h("input", { type: "number", inputmode: "decimal", min: "0", id: `autoplay-${name}`,
      "data-testid": `autoplay-${name}`, ...attrs }));
}

function form() {
  return h("section", { class: "autoplay-form", id: "autoplay-form", "data-testid": "autoplay-form",
    role: "dialog", "aria-labelledby": "autoplay-title", hidden: true },
  h("h2", { id: "autoplay-title", "data-i18n": "autoplay.title", text: t("autoplay.title") }),
  h("p", { id: "autoplay-layout", "data-testid": "autoplay-layout", class: "small" }),
  field("rounds", { min: "1", max: String(MOST_ROUNDS), step: "1", value: "10", inputmode: "numeric" }),
  field("loss", { step: "any" }), field("win", { step: "any" }), field("balance", { step: "any" }),
  h("p", { class: "small muted", "data-i18n": "autoplay.note", text: t("autoplay.note") }),
  h("div", { class: "autoplay__buttons" },
    h("button", { type: "button", class: "btn", "data-testid": "autoplay-cancel", "data-i18n": "tabs.close",
      text: t("tabs.close"), onclick: () => showForm(false) }),
    h("button", { type: "button", class: "btn btn--primary", "data-testid": "autoplay-start",
      "data-i18n": "autoplay.start", text: t("autoplay.start"), onclick: start })));
}

function showForm(show) {
  const f = $("#autoplay-form");
  f.hidden = !show;
  if (show) {
    $("#autoplay-layout").textContent = t("autoplay.each", { layout: layoutText(tools.layout()) || "—" });
    $("#autoplay-rounds").focus();
  }
}

/** A money field in the currency's major units ("12.50" ฿) as minor units; null if empty. */
function amountOf(name) {
  const raw = $(`#autoplay-${name}`).value.trim();
  if (!raw) return null;
  const v = Number(raw);
  return Number.isFinite(v) && v >= 0 ? Math.round(v * 10 ** currencyDecimals()) : null;
}

function start() {
  const layout = tools.layout();
  const rounds = Math.floor(Number($("#autoplay-rounds").value));
  if (!Object.keys(layout).length || !(rounds >= 1 && rounds <= MOST_ROUNDS)) return;
  run = { layout, total: rounds, played: 0, net: 0, results: new Map(), lossLimit: amountOf("loss"),
    winOver: amountOf("win"), balanceUnder: amountOf("balance") };
  ended = null;
  showForm(false);
  renderAutoplay();
  if (tools.canBet()) setTimeout(place, 0);  // this round, if it still takes bets
}

function stop(reason) {
  if (!run) return;
  run = null;
  ended = reason;
  tools.notice(t("autoplay.ended", { reason: t(`autoplay.why.${reason}`) }));
  renderAutoplay();
}

function onEvent(ev) {
  if (!run) return;
  if (ev.type === "round_opened") setTimeout(place, PLACE_AFTER_MS);
  else if (ev.type === "table_paused") stop("paused");
  else if (ev.type === "round_cancelled") stop("cancelled");
}

function onMessage(msg) {
  if (!run) return;
  switch (msg.type) {
    case "bet_settled": {
      if (!run.results.has(msg.round_id)) break;
      const net = msg.returned - deductedFor(msg.spot, msg.amount);
      run.results.set(msg.round_id, run.results.get(msg.round_id) + net);
      run.net += net;
      break;
    }
    case "bet_rejected": case "slip_rejected": case "error": stop("refused"); break;
    case "reality_check": stop("reality_check"); break;
    case "session_ended": stop("session_ended"); break;
    default: break;
  }
}

/** The stops, judged before each round is played: the rounds settled so far, the balance. */
function due() {
  if (run.played >= run.total) return "done";
  if (run.lossLimit !== null && -run.net >= run.lossLimit && run.lossLimit > 0) return "loss";
  if (run.winOver !== null && [...run.results.values()].some((n) => n > run.winOver)) return "win";
  const balance = tools.balance();
  if (run.balanceUnder !== null && balance !== null && balance < run.balanceUnder) return "balance";
  return null;
}

function place() {
  if (!run) return;
  const why = due();
  if (why) { stop(why); return; }
  if (!tools.canBet()) return;  // e.g. reconnecting: the next round, or the connection's stop
  if (!tools.setDraft({ ...run.layout })) { stop("refused"); return; }
  const round = tools.roundId();
  tools.confirm();
  if (Object.keys(tools.draft()).length) { stop("refused"); return; }  // the page refused it
  run.played += 1;
  run.results.set(round, 0);
  renderAutoplay();
}

function renderAutoplay() {
  const status = $("#autoplay-status");
  const open = $("#btn-autoplay");
  if (!status || !open) return;
  open.textContent = t("autoplay.open");
  open.hidden = !!run;
  open.disabled = !Object.keys(tools.layout()).length;
  status.hidden = !run && !ended;
  status.dataset.state = run ? "running" : (ended || "");
  status.dataset.played = run ? String(run.played) : "";
  $("#autoplay-stop").hidden = !run;
  $("#autoplay-stop").textContent = t("autoplay.stop");
  $("#autoplay-text").textContent = run
    ? t("autoplay.running", { n: run.played, total: run.total, net: money(run.net) })
    : ended ? t("autoplay.ended", { reason: t(`autoplay.why.${ended}`) }) : "";
}

/** Redraw on the table's render (the layout, what can be started). */
export { renderAutoplay };
