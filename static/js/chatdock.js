// The chat on a phone held upright, while the table's video plays: over the video's lower
// left (the lower right is the result's, the upper left the Banker's cards), its last
// lines and the field to write in, collapsible to a small "Chat" tab — not a panel below
// the betting that takes the table off the screen to be read. The "Chat" button of the
// table's bar opens it again. Without a picture, or on a wider screen, or held sideways (a
// sheet of its own: app.css), the chat stays where the page has it.

import { t, onLangChange } from "./i18n.js";
import { h } from "./common.js";

const PREF = "livetable.chatDock";
const PHONE = "(max-width: 640px) and (orientation: portrait)";

/** Dock `chat` (the chat's panel) over the video of the stage inside `wrap`. */
export function mountChatDock(chat, wrap, chatButton) {
  const home = document.createComment("chat");
  chat.before(home);
  const toggle = h("button", { type: "button", class: "btn btn--small chat__dock-toggle",
    "data-testid": "chat-collapse", onclick: () => collapse(!chat.classList.contains("chat--collapsed")) });
  chat.append(toggle);
  const phone = matchMedia(PHONE);

  function collapse(shut) {
    chat.classList.toggle("chat--collapsed", shut);
    toggle.textContent = shut ? t("tabs.chat") : "–";
    toggle.setAttribute("aria-label", shut ? t("chat.dock_open") : t("chat.dock_close"));
    toggle.setAttribute("aria-expanded", shut ? "false" : "true");
    try { localStorage.setItem(PREF, shut ? "collapsed" : "open"); } catch { /* private mode */ }
  }

  function place() {
    const stage = wrap.querySelector(".stage");
    const video = stage && stage.dataset.video === "on" ? stage.querySelector(".video") : null;
    const dock = phone.matches && video;
    if (dock && chat.parentElement !== video) {
      video.append(chat);
      chat.classList.add("chat--dock");
      let kept = null;
      try { kept = localStorage.getItem(PREF); } catch { /* private mode */ }
      collapse(kept === "collapsed");
    } else if (!dock && chat.classList.contains("chat--dock")) {
      home.after(chat);
      chat.classList.remove("chat--dock", "chat--collapsed");
    }
    chat.dataset.docked = dock ? "1" : "0";
  }

  phone.addEventListener("change", place);
  new MutationObserver(place).observe(wrap, { subtree: true, attributes: true, attributeFilter: ["data-video"] });
  chatButton.addEventListener("click", () => {
    if (chat.dataset.docked !== "1") return;
    collapse(false);
    // the bar scrolled to the chat's old place: the video is at the top of the page
    requestAnimationFrame(() => window.scrollTo({ top: 0, behavior: "instant" }));
  });
  onLangChange(() => collapse(chat.classList.contains("chat--collapsed")));
  place();
}
