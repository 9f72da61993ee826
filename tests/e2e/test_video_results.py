"""A round's results stand on a table with live video (docs/video.md, "Results stand").

The page shows a reveal and the results when the video shows them, seconds after the server
sent them; the server opens the next round on its own clock. Here the studio's pause between
rounds (2 s) is shorter than the test stream's delay (about 3-5 s), as in the field: the
Banker's hand, each position's result and the player's own "You win" / "returned" must stand
at least RESULT_STAND_MS after the Banker's hand was drawn face up, before the next round's
opening clears them. A real HLS stream (the media server of deploy/media/ and a test card
pushed over RTMP), played by hls.js in Debian's chromium.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from layout import SPOTS, uncovered
from playwright.sync_api import Browser, expect
from procutil import stop
from table_page import Bet, Server, TablePage
from test_video import card_stream, start_livetable

pytestmark = pytest.mark.browser

RESULT_STAND_MS = 3_000  # static/js/video.js

#: When the Banker's hand turned face up, when the positions' results were shown and cleared,
#: and when the win pill was shown and hidden (Date.now() of each).
STANDING = """
(() => {
  window.__stand = [];
  const seen = {};
  const note = (what) => window.__stand.push({ what, t: Date.now() });
  new MutationObserver(() => {
    const b = document.querySelector('[data-testid=hand-BANKER]');
    const r = document.querySelector('[data-testid=result-P1]');
    const w = document.querySelector('#win');
    const now = {
      banker: b ? b.dataset.revealed === '1' : false,
      result: r ? r.textContent !== '' : false,
      win: w ? !w.hidden : false,
    };
    for (const [k, v] of Object.entries(now)) {
      if (v !== (seen[k] || false)) note(`${k}:${v ? 'on' : 'off'}`);
      seen[k] = v;
    }
  }).observe(document, { subtree: true, attributes: true, childList: true, characterData: true });
})();
"""


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("video-results")
    with card_stream(base) as media:
        # betting long enough that a page holding the opening still has seconds to bet in
        # (with room: on a loaded machine the stream, so the page, runs further behind)
        server = start_livetable(base, "--tables", "1", "--betting-seconds", "12",
                                 "--reveal-interval", "1",
                                 "--stream", f"t1={media.playlist_url('t1')}")
        try:
            yield server
        finally:
            stop(server.process)


def test_results_and_the_win_stand_after_the_video_shows_the_banker(
        studio: Server, browser: Browser) -> None:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900}, locale="en-US")
    ctx.set_default_timeout(30_000)
    ctx.add_init_script(STANDING)
    try:
        page = ctx.new_page()
        table = TablePage(page, studio.url).open("t1")
        expect(page.get_by_test_id("video")).to_have_attribute("data-state", "playing")
        # a round with a bet in it
        table.wait_betting(at_least_ms=1_500)
        table.place(Bet("P1", 100))
        table.confirm([Bet("P1", 100)])
        start = page.evaluate("window.__stand.length")
        # its results, then the next round's opening that clears them
        page.wait_for_function(
            """(start) => { const s = window.__stand.slice(start).map((e) => e.what);
                            const i = s.indexOf('banker:on');
                            return i >= 0 && s.slice(i).includes('result:off'); }""",
            arg=start, timeout=90_000)
        stand = page.evaluate("window.__stand")[start:]
        on = next(i for i, e in enumerate(stand) if e["what"] == "banker:on")
        banker = stand[on]["t"]
        after = stand[on:]
        cleared = next(e["t"] for e in after if e["what"] == "result:off")
        assert any(e["what"] == "result:on" for e in after), stand
        assert page.evaluate("window.livetableVideo.state") == "playing"
        assert cleared - banker >= RESULT_STAND_MS, stand
        # the player's own result: shown, and standing as long
        win_on = [e["t"] for e in after if e["what"] == "win:on"]
        assert win_on, stand
        win_off = next(e["t"] for e in after if e["what"] == "win:off" and e["t"] > win_on[0])
        assert win_off - banker >= RESULT_STAND_MS, stand
        assert win_off - win_on[0] >= RESULT_STAND_MS - 400, stand
    finally:
        ctx.close()


#: Common screens, both ways up where a device is turned: phones, tablets, laptops, desktops.
SCREENS = [(360, 640), (640, 360), (390, 844), (844, 390), (412, 915), (915, 412),
           (768, 1024), (1024, 768), (820, 1180), (1180, 820), (800, 1280), (1280, 800),
           (1280, 720), (1366, 768), (1440, 900), (1536, 864), (1920, 1080)]


def test_spots_and_confirm_on_screen_with_the_video_at_every_common_size(
        studio: Server, browser: Browser) -> None:
    controls = [f"spot-{s}" for s in SPOTS] + ["confirm"]
    bad = {}
    pages = {}
    for phone in (True, False):  # a phone's browser, and a desktop one
        ctx = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-US",
                                  reduced_motion="reduce", is_mobile=phone, has_touch=phone)
        ctx.set_default_timeout(30_000)
        pages[phone] = (ctx, ctx.new_page())
        TablePage(pages[phone][1], studio.url).open("t1")
    try:
        for width, height in SCREENS:
            page = pages[min(width, height) <= 480][1]
            expect(page.get_by_test_id("video")).to_have_attribute("data-state", "playing")
            page.set_viewport_size({"width": width, "height": height})
            TablePage(page, studio.url).wait_betting(at_least_ms=500, timeout=60_000)
            page.wait_for_timeout(150)  # the layout settles
            missing = uncovered(page, controls)
            scrolled = page.evaluate("document.scrollingElement.scrollTop")
            if missing or scrolled:
                bad[f"{width}x{height}"] = (missing, scrolled)
        assert bad == {}, "\n".join(f"{k}: {v}" for k, v in bad.items())
    finally:
        for ctx, _ in pages.values():
            ctx.close()
