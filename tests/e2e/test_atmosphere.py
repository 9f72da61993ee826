"""The studio's atmosphere and the shoe's statistics on the table.

Sound and voice are off until the player turns them on; then a chip placed clicks, the
countdown's last five seconds tick, cards make their sounds, and the game is called out in
the page's language (the browser's speech synthesis, caught here as it is spoken). Chips and
cards move — unless the player asked for reduced motion. Players online come from the
server's presence frame; the statistics are counted from the roadmap the server sends.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Browser, Page, expect
from table_page import Bet, Server, TablePage, wait_until

pytestmark = pytest.mark.browser

#: Installed before the page's scripts: what speech synthesis is asked to say, and in which
#: language (headless chromium has no voice to speak with).
CATCH_SPEECH = """
window.__said = [];
if (window.speechSynthesis) {
  window.speechSynthesis.speak = (u) => window.__said.push({ text: u.text, lang: u.lang });
}
"""


def auto_table(server: Server) -> str:
    tables = server.api("/api/tables")["tables"]
    return str(next(t["id"] for t in tables if t["mode"] == "auto"))


def test_sounds_and_voice_are_off_until_turned_on_then_follow_the_game(
        server: Server, browser: Browser) -> None:
    table = auto_table(server)
    contexts, pages = [], {}
    try:
        for name in ("on", "off"):
            ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
            ctx.add_init_script("localStorage.setItem('livetable.lang', 'th')")
            ctx.add_init_script(CATCH_SPEECH)
            contexts.append(ctx)
            pages[name] = TablePage(ctx.new_page(), server.url).open(table)
        on, off = pages["on"], pages["off"]
        on.page.get_by_test_id("atmosphere").locator("summary").click()
        for switch in ("atmo-effects", "atmo-countdown", "atmo-voice"):
            on.page.get_by_test_id(switch).check()
        log = "(document.body.dataset.soundLog || '').split(' ').filter(Boolean)"
        for p in (on, off):
            p.wait_betting(at_least_ms=3_000)
            p.place(Bet("P1", 10))
            assert ("chip" in p.page.evaluate(log)) is (p is on)
        # (a hidden page's timers are slowed: poll by time, each page in turn)
        on.page.bring_to_front()
        on.page.wait_for_function(f"{log}.includes('tick')", polling=100, timeout=20_000)
        # the round's last tone, or the next round's: a countdown frozen while the page was
        # offline at the close sounds nothing for that close (a loaded run: ticks, no last)
        on.page.wait_for_function(f"{log}.includes('last')", polling=100, timeout=30_000)
        on.page.wait_for_function(
            "window.__said.some((s) => s.text === 'ปิดรับเดิมพัน' && s.lang === 'th-TH')",
            polling=100, timeout=20_000)
        on.page.wait_for_function(f"{log}.includes('flip')", polling=100, timeout=20_000)
        on.page.wait_for_function(
            "window.__said.some((s) => s.text === 'เชิญวางเดิมพัน')", polling=100,
            timeout=30_000)
        # a round's cards are dealt during its countdown: the next round's may come just
        # after its call-out
        on.page.wait_for_function(f"{log}.includes('card')", polling=100, timeout=30_000)
        sounds = on.page.evaluate(log)
        assert {"card", "last"} <= set(sounds), sounds
        # the other page heard the same rounds and made no sound, said nothing
        off.page.bring_to_front()
        # (betting now, or once this round's reveals are over: a loaded machine may have
        # gone on to them since the card sound)
        expect(off.page.get_by_test_id("phase")).to_have_attribute("data-phase", "betting",
                                                                   timeout=30_000)
        assert off.page.evaluate(log) == []
        assert off.page.evaluate("window.__said") == []
        # the settings are kept
        on.page.reload()
        on.wait_online()
        assert on.page.get_by_test_id("atmo-voice").is_checked()
    finally:
        for ctx in contexts:
            ctx.close()


def test_the_last_seconds_tone_sounds_when_a_busy_page_skips_the_last_second(
        server: Server, browser: Browser) -> None:
    """The countdown's last tone played only if an update fell in the last second: a page
    whose timers were held back past it (a loaded phone; here the page's clock jumps over
    it) closed the betting in silence."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    try:
        page = ctx.new_page()
        page.clock.install()  # the page's own time, running as usual until it jumps
        tp = TablePage(page, server.url).open(auto_table(server))
        page.get_by_test_id("atmosphere").locator("summary").click()
        page.get_by_test_id("atmo-countdown").check()
        page.wait_for_function("""() => { const r = Number(document.querySelector(
            '[data-testid=countdown]').dataset.remainingMs); return r > 1200 && r <= 2800 }""",
                               polling=50, timeout=30_000)
        page.clock.fast_forward(3_000)  # each timer fires once: after the last second
        # this round's sounds: those after its last tick (one played at the second the wait
        # saw); the box may have been ticked in an earlier round's last second, whose tone
        # is in the log too
        log = "(document.body.dataset.soundLog || '').split(' ').filter(Boolean)"
        this_round = f"(() => {{ const l = {log}; return l.slice(l.lastIndexOf('tick') + 1) }})()"
        page.wait_for_function(f"{this_round}.includes('last')", timeout=5_000)
        assert tp.page.evaluate(this_round) == ["last"]
    finally:
        ctx.close()


@pytest.mark.parametrize("motion", ["reduce", "no-preference"])
def test_chips_and_cards_move_unless_reduced_motion_is_asked(
        server: Server, browser: Browser, motion: str) -> None:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US",
                              reduced_motion=motion)  # type: ignore[arg-type]
    try:
        tp = TablePage(ctx.new_page(), server.url).open(auto_table(server))
        tp.wait_betting(at_least_ms=2_500)
        tp.place(Bet("P2", 10))
        animation = tp.page.evaluate("""() => getComputedStyle(
            document.querySelector('[data-testid=stake-P2] .stake--draft')).animationName""")
        assert animation == ("none" if motion == "reduce" else "chip-drop")
    finally:
        ctx.close()


def test_players_online_and_this_shoes_statistics(server: Server, browser: Browser) -> None:
    table = auto_table(server)
    wait_until(lambda: len(server.api(f"/api/tables/{table}")["roadmap"]) >= 2, timeout=120)
    ctxs = [browser.new_context(locale="en-US") for _ in range(2)]
    try:
        first = TablePage(ctxs[0].new_page(), server.url).open(table)
        online = first.page.get_by_test_id("online")
        expect(online).to_be_visible()
        before = int(online.get_attribute("data-online") or 0)
        second = TablePage(ctxs[1].new_page(), server.url).open(table)
        expect(online).to_have_attribute("data-online", str(before + 1), timeout=10_000)
        second.page.close()
        expect(online).to_have_attribute("data-online", str(before), timeout=10_000)

        page: Page = first.page
        # the page's counts and the server's roadmap of one shoe: a shoe that ended meanwhile
        # (a loaded run) empties the page's statistics, and the server's roadmap starts
        # again shorter than what the page counted — read both again
        deadline = time.monotonic() + 120
        while True:
            seen = page.evaluate("""() => {
                const b = document.querySelector('[data-testid=stats-banker]');
                if (!b) return null;  // a new shoe: no round of it settled yet
                const out = {banker: [Number(b.dataset.pok), Number(b.dataset.pair)]};
                for (const row of document.querySelectorAll('[data-testid^=stats-P]')) {
                  out[row.dataset.testid.slice(6)] = ['win', 'lose', 'tie', 'pair', 'flush']
                    .map((k) => Number(row.dataset[k]));
                }
                return out;
            }""")
            roadmap = server.api(f"/api/tables/{table}")["roadmap"]
            if seen is not None and len(roadmap) >= sum(seen["P1"][:3]):
                break
            assert time.monotonic() < deadline, "no statistics of one shoe on the page"
            time.sleep(0.5)
        shown = sum(seen["P1"][:3])
        roadmap = roadmap[:shown]  # a round may have settled since the page counted
        for pos in ("P1", "P2", "P3", "P4", "P5"):
            results = [r for e in roadmap for r in e["results"] if r["hand"] == pos]
            assert seen[pos] == [
                sum(r["outcome"] == "win" for r in results),
                sum(r["outcome"] == "lose" for r in results),
                sum(r["outcome"] == "tie" for r in results),
                sum(r["pair"] for r in results), sum(r["flush"] for r in results)], pos
        bankers = [e["banker"] for e in roadmap]
        assert seen["banker"] == [sum(b["points"] >= 8 for b in bankers),
                                  sum(b["pair"] for b in bankers)]
    finally:
        for ctx in ctxs:
            ctx.close()
