// Tips to the dealer (docs/protocol.md §3, tip), phone first.
//
// A "Tip" button sits with the bet tools (on a phone upright: the bet bar's second row,
// beside Double), shown only when the welcome says this player may tip
// (welcome.player.tips = {min, max}: an operator that turned tips off sends none, and a
// viewer has no player). It opens a sheet over the bottom of the screen: the chips that fit
// the tip limits, then "Tip the dealer {amount}" to confirm — nothing is sent before that.
// The answer shows as a toast at the top of the table: thanks and the new balance
// (tip_accepted), or what refused it (an error naming the tip_id, in the page's language).
//
// Each confirmed tip has a fresh tip_id; while it is unanswered it is kept, and a welcome
// after a lost connection sends it again with the SAME tip_id: the server takes it once and
// answers the re-send as it answered the first.

import { t } from "./i18n.js";
import { h, money, announce } from "./common.js";
import { compactMoney } from "./tablebets.js";
import { newBetId } from "./api.js";
import { notice, showError, errorText } from "./tableresults.js";

const CHIP_VALUES = [5, 10, 25, 50, 100, 500, 1000, 5000, 10000];
const RESEND_MS = 10_000;
// Answers that say "not recorded yet, send it again with the same tip_id" (the store did
// not answer; the wallet's answer is still awaited): sent again after 2, 4 and 8 s before
// the page gives up and says so. A seamless wallet may have debited already: only the
// re-send puts the tip in the ledger, the Bet Record and the dealer's console.
const AGAIN = new Set(["unavailable", "wallet_pending"]);
const AGAIN_TRIES = 3;
const ERRORS = new Set(["tips_off", "bad_tip_id", "tip_out_of_range", "duplicate_tip_id",
  "insufficient_funds", "rg_limit", "reality_check_pending", "session_ended", "not_your_table",
  "wallet_refused", "wallet_unavailable", "wallet_pending", "rate_limited", "unavailable",
  "not_a_player"]);

/** The chips a tip may be: the player's chips (an operator's) or the page's, in the tip's
 *  limits; at least the smallest tip. Six at most, as the bet bar's. */
export function tipChips(limits, playerChips) {
  const source = playerChips && playerChips.length ? playerChips : CHIP_VALUES;
  const fit = source.filter((v) => v >= limits.min && v <= limits.max);
  return (fit.length ? fit : [limits.min]).slice(0, 6);
}

/**
 * Mount the tip button and its sheet. `balance()` is the balance shown (a chip it does not
 * cover is greyed), `player()` the welcome's player. The new balance of a tip taken is
 * tableframes.js's to show, as every balance a frame carries.
 */
export function mountTips(conn, { button, sheet, player, balance }) {
  let limits = null;        // welcome.player.tips: {min, max}, or null (no tips here)
  let chosen = null;        // the amount picked in the sheet
  let pending = null;       // {tip_id, amount}: confirmed, sent, not answered yet
  // A tip unanswered for a while is sent again, the same tip_id (the server takes it once):
  // its frame may have been dropped (the connection's frame budget) without a word of it.
  setInterval(() => { if (pending && Date.now() - pending.sent > RESEND_MS) transmit(); }, 1000);

  const chipsBox = h("div", { class: "tip-sheet__chips", role: "radiogroup",
    "data-testid": "tip-chips", "aria-labelledby": "tip-title" });
  const limitsLine = h("p", { class: "small muted tip-sheet__limits", "data-testid": "tip-limits" });
  const send = h("button", { type: "button", class: "btn btn--primary", "data-testid": "tip-send" });
  const cancel = h("button", { type: "button", class: "btn", "data-testid": "tip-cancel",
    "data-i18n": "tip.cancel", text: t("tip.cancel") });
  sheet.replaceChildren(
    h("h2", { id: "tip-title", "data-i18n": "tip.title", text: t("tip.title") }),
    h("p", { class: "small", "data-i18n": "tip.explain", text: t("tip.explain") }),
    chipsBox, limitsLine, h("div", { class: "tip-sheet__actions" }, cancel, send));

  function show() {
    button.hidden = !limits;
    if (!limits) close();
    button.disabled = !!pending;
  }

  function render() {
    if (!limits) return;
    const p = player();
    const chips = tipChips(limits, p && p.chips);
    if (!chips.includes(chosen)) chosen = null;
    const have = balance();
    chipsBox.replaceChildren(...chips.map((v, i) => {
      const b = h("button", {
        type: "button", role: "radio", class: `chip chip--${i}`, "data-testid": `tip-chip-${v}`,
        "data-value": String(v), "aria-checked": v === chosen ? "true" : "false",
        "aria-label": t("chip.aria", { amount: money(v) }),
      }, h("span", { text: compactMoney(v) }));
      if (have !== null && v > have) b.dataset.affordable = "none";
      b.addEventListener("click", () => {
        if (b.dataset.affordable === "none") { showError(t("tip.error.insufficient_funds")); return; }
        chosen = v; render();
      });
      return b;
    }));
    limitsLine.textContent = t("tip.limits", { min: money(limits.min), max: money(limits.max) });
    send.disabled = chosen === null || !!pending;
    send.textContent = chosen === null ? t("tip.pick") : t("tip.send", { amount: money(chosen) });
  }

  function open() {
    if (!limits || pending) return;
    chosen = null;
    render();
    sheet.hidden = false;
    button.setAttribute("aria-expanded", "true");
    chipsBox.querySelector(".chip")?.focus();
  }

  function close() {
    sheet.hidden = true;
    button.setAttribute("aria-expanded", "false");
  }

  function transmit() {
    if (!pending) return;
    pending.sent = Date.now();
    conn.send({ type: "tip", tip_id: pending.tip_id, amount: pending.amount });
  }

  button.addEventListener("click", () => (sheet.hidden ? open() : close()));
  cancel.addEventListener("click", () => { close(); button.focus(); });
  sheet.addEventListener("keydown", (e) => { if (e.key === "Escape") { close(); button.focus(); } });
  send.addEventListener("click", () => {
    if (chosen === null || pending) return;
    pending = { tip_id: newBetId(), amount: chosen, sent: 0, again: 0 };
    transmit();
    close();
    show();
    announce(t("tip.sending", { amount: money(pending.amount) }));
  });

  conn.addEventListener("welcome", (e) => {
    const p = e.detail.msg.player;
    limits = p && p.tips ? p.tips : null;
    show();
    transmit();  // a tip unanswered when the connection dropped: the same tip_id again
  });
  conn.addEventListener("message", (e) => {
    const msg = e.detail;
    if (!pending) return;
    if (msg.type === "tip_accepted" && msg.tip_id === pending.tip_id) {
      pending = null;
      notice(t("tip.thanks", { amount: money(msg.amount) }));
      show();
    } else if (msg.type === "error" && msg.tip_id === pending.tip_id) {
      if (AGAIN.has(msg.code) && pending.again < AGAIN_TRIES) {
        pending.again += 1;  // the interval above sends it again, 2, 4, then 8 s from now
        pending.sent = Date.now() - RESEND_MS + 1000 * 2 ** pending.again;
        return;
      }
      pending = null;
      const key = `tip.error.${msg.code}`;
      showError(ERRORS.has(msg.code) && t(key) !== key ? t(key) : errorText(msg.code, msg.message));
      show();
    }
  });
  return { refresh: render };
}
