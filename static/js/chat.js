// The table chat, on the table page and the dealer console, and who is dealing.
//
// A chat line is text and only ever text: it goes into the page with textContent (h()'s
// "text", or a text node), never innerHTML — a line "<img src=x onerror=…>" shows those
// characters and creates no element. The server trims and cleans it the same way for
// everyone (livetable/chat.py); the page only keeps the input to 200 characters.
//
// The lines come from the welcome (the table's last 50) and then one by one as `chat`
// frames; `chat_deleted` takes one off; `dealer_changed` says who deals now. A viewer (no
// player) reads only. On the dealer console each player's line has Mute and Delete, sent
// by the console's own command queue (dealer.js), which pairs them with their answers.

import { serverNow } from "./clock.js";
import { t, onLangChange } from "./i18n.js";
import { h, tName, timeOfDay, announce } from "./common.js";

const KEEP = 100;          // lines kept on screen (the welcome brings 50)
const MAX_CHARS = 200;
export const MUTE_MINUTES = 5;
const MUTE_CHOICES = [5, 15, 60, 1440];  // a day at most from the console (the wire allows a week)

/**
 * Mount the chat panel in `root` (an empty element), fed by `conn`.
 * options: presenter — an element that shows who deals (table page); moderate — the
 * console's { send(id, text), mute(playerId, minutes), remove(id) } (dealer console).
 */
export function mountChat(conn, root, { presenter = null, moderate = null } = {}) {
  let lines = [];
  let canSend = !!moderate;
  let dealer = null;
  const sent = new Map();  // client_msg_id → the text sent, until accepted or refused
  let seq = 0;

  const title = h("h2", { class: "chat__title", "data-testid": "chat-title" });
  const list = h("ol", { class: "chat__list", "data-testid": "chat-list", "aria-live": "polite", "aria-relevant": "additions" });
  const input = h("input", { type: "text", class: "input chat__input", "data-testid": "chat-input",
    maxlength: String(MAX_CHARS), autocomplete: "off", enterkeyhint: "send" });
  const send = h("button", { class: "btn btn--small", "data-testid": "chat-send" });
  const status = h("p", { class: "small chat__status", "data-testid": "chat-status", role: "status" });
  const form = h("form", { class: "chat__form", autocomplete: "off" }, input, send);
  root.classList.add("chat");
  root.replaceChildren(title, list, form, status);

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text || !canSend) return;
    const id = `c${Date.now().toString(36)}-${++seq}`;
    const ok = moderate ? moderate.send(id, text) : conn.send({ type: "chat_send", client_msg_id: id, text });
    if (ok === false) { showStatus(t("chat.err.offline"), true); return; }
    sent.set(id, text);
    if (sent.size > 20) sent.delete(sent.keys().next().value);
    input.value = "";
  });

  conn.addEventListener("welcome", (e) => {
    const msg = e.detail.msg;
    canSend = !!moderate || !!msg.player;
    lines = (msg.chat || []).slice(-KEEP);
    dealer = presenterOf(msg.dealer);
    showStatus("", false);
    render();
  });
  conn.addEventListener("message", (e) => {
    const msg = e.detail;
    switch (msg.type) {
      case "chat":
        if (lines.some((l) => l.id === msg.id)) return;
        lines.push(msg);
        if (lines.length > KEEP) lines.shift();
        list.append(lineEl(msg));
        if (list.children.length > KEEP) list.firstChild.remove();
        list.scrollTop = list.scrollHeight;
        emptyNote();
        return;
      case "chat_deleted":
        lines = lines.filter((l) => l.id !== msg.id);
        for (const li of list.querySelectorAll("li[data-id]")) if (li.dataset.id === msg.id) li.remove();
        emptyNote();
        return;
      case "dealer_changed":
        dealer = presenterOf(msg);
        renderPresenter();
        announce(t("chat.dealing", { name: dealer.name }));
        return;
      case "chat_accepted":
        sent.delete(msg.client_msg_id);
        showStatus("", false);
        return;
      case "chat_rejected": {
        // the refused line back in the input (unless a new one is being typed), to amend
        const text = sent.get(msg.client_msg_id);
        sent.delete(msg.client_msg_id);
        if (text && !input.value) input.value = text;
        if (msg.code === "muted" && typeof msg.muted_until === "number") {  // for how long
          const n = Math.max(1, Math.ceil((msg.muted_until - serverNow()) / 60_000));
          showStatus(t("chat.err.muted_for", { n }), true);
          return;
        }
        showStatus(t(`chat.err.${msg.code}`) === `chat.err.${msg.code}` ? msg.message : t(`chat.err.${msg.code}`), true);
        return;
      }
      default:
    }
  });
  // The dealer leaves when the table goes back to dealing by itself.
  conn.addEventListener("event", (e) => {
    if (e.detail.type === "mode_changed" && e.detail.mode === "auto" && dealer) {
      dealer = null;
      renderPresenter();
    }
  });
  onLangChange(render);
  render();

  function showStatus(text, bad) {
    status.textContent = text;
    status.classList.toggle("error", !!bad);
    if (text && bad) announce(text, { urgent: true });
  }

  function lineEl(m) {
    const who = m.role === "system" ? t("chat.system") : m.from;
    const li = h("li", { class: `chat__line chat__line--${m.role}`, "data-testid": "chat-line", "data-id": m.id, "data-role": m.role },
      h("time", { class: "muted small", datetime: new Date(m.at).toISOString(), text: timeOfDay(new Date(m.at)) }), " ",
      h("strong", { class: "chat__from", dir: "auto" }, h("bdi", { text: who })),
      m.role === "dealer" ? h("span", { class: "chat__badge small", text: t("chat.dealer_role") }) : "",
      " ", h("span", { class: "chat__text", "data-testid": "chat-text", text: shownText(m) }));
    if (moderate) {
      if (m.role === "player" && m.player_id) li.append(" ", muteControls(m.player_id));
      li.append(" ", h("button", { type: "button", class: "btn btn--small btn--danger", "data-testid": "chat-delete",
        text: t("chat.delete"), onclick: () => moderate.remove(m.id) }));
    }
    return li;
  }

  /** The console's mute: for how long (5 min to a day), and its lifting (0 minutes). */
  function muteControls(playerId) {
    const minutes = h("select", { class: "chat__mute-minutes", "data-testid": "chat-mute-minutes",
      "aria-label": t("chat.mute_for") },
    ...MUTE_CHOICES.map((n) => h("option", { value: String(n), text: t("chat.minutes", { n }) })));
    minutes.value = String(MUTE_MINUTES);
    return h("span", { class: "chat__mute" }, minutes, " ",
      h("button", { type: "button", class: "btn btn--small", "data-testid": "chat-mute", text: t("chat.mute_short"),
        onclick: () => moderate.mute(playerId, Number(minutes.value)) }), " ",
      h("button", { type: "button", class: "btn btn--small", "data-testid": "chat-unmute", text: t("chat.unmute"),
        onclick: () => moderate.mute(playerId, 0) }));
  }

  /** A system line in the page's language when it names its notice; else its text. */
  function shownText(m) {
    if (m.role !== "system" || !m.notice) return m.text;
    const key = `chat.notice.${m.notice.key}`;
    const v = t(key, { n: m.notice.minutes });
    return v === key ? m.text : v;
  }

  function emptyNote() {
    list.dataset.empty = lines.length ? "0" : "1";
    list.setAttribute("aria-label", lines.length ? t("chat.title") : t("chat.empty"));
  }

  function renderPresenter() {
    if (!presenter) return;
    presenter.hidden = !dealer;
    if (!dealer) { presenter.replaceChildren(); return; }
    presenter.replaceChildren(
      dealer.photo ? h("img", { class: "presenter__photo", src: dealer.photo, alt: "", width: "32", height: "32", "data-testid": "presenter-photo" }) : "",
      h("span", { "data-testid": "presenter-name" }, tName("chat.dealing", dealer.name)));
  }

  function render() {
    title.textContent = t("chat.title");
    send.textContent = t("chat.send");
    input.placeholder = canSend ? t("chat.placeholder") : t("chat.viewer");
    input.setAttribute("aria-label", t("chat.placeholder"));
    input.disabled = !canSend;
    send.disabled = !canSend;
    list.replaceChildren(...lines.map(lineEl));
    list.scrollTop = list.scrollHeight;
    emptyNote();
    renderPresenter();
  }
}

/** The presenter as shown: a name typed all in lower case ("anna") capitalised ("Anna"). */
function presenterOf(d) {
  if (!d || !d.name) return null;
  const name = d.name === d.name.toLowerCase()
    ? d.name.replace(/(^|[\s'-])(\p{Ll})/gu, (_, a, b) => a + b.toUpperCase()) : d.name;
  return { name, photo: d.photo || null };
}
