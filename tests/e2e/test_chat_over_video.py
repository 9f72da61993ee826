"""The chat on a phone held upright, with the table's video: over the video's lower left,
collapsible, never a panel below the betting; without a picture it stays where it was.
In English, Thai and Hindi. (The video is the test studio's: tests/e2e/test_video.py.)"""

from __future__ import annotations

from layout import overlaps
from playwright.sync_api import BrowserContext, Page, expect
from table_page import Server
from test_video import studio  # noqa: F401  # the fixture: a live HLS stream on t1

from livetable.cli.media import MediaServer


def inside(page: Page, inner: str, outer: str) -> bool:
    """``inner``'s box within ``outer``'s, both read in one go (two reads could straddle a
    change of the layout)."""
    result: bool = page.evaluate(
        """([inner, outer]) => {
            const box = (id) => document.querySelector(`[data-testid=${id}]`)
                .getBoundingClientRect();
            const a = box(inner), b = box(outer);
            return a.left >= b.left - 0.5 && a.top >= b.top - 0.5
                && a.right <= b.right + 0.5 && a.bottom <= b.bottom + 0.5;
        }""",
        [inner, outer],
    )
    return result


def test_a_phone_chats_over_the_video_and_folds_it_away(
        studio: tuple[Server, MediaServer], phone: BrowserContext) -> None:  # noqa: F811
    server, _ = studio
    page = phone.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server.url}table.html?table=t1")
    expect(page.get_by_test_id("video")).to_have_attribute("data-state", "playing")
    chat = page.get_by_test_id("chat")
    expect(chat).to_have_attribute("data-docked", "1")
    assert inside(page, "chat", "video")
    assert overlaps(page, "chat", ["[data-testid^=hand-]", "[data-testid=video-unmute]"]) == []
    field = page.get_by_test_id("chat-input")
    expect(field).to_be_enabled()
    assert inside(page, "chat-send", "video")
    field.fill("hello over the video")
    field.press("Enter")
    expect(page.get_by_test_id("chat-text").filter(has_text="hello over the video")).to_be_visible()

    fold = page.get_by_test_id("chat-collapse")
    fold.tap()
    expect(field).to_be_hidden()
    expect(fold).to_have_text("Chat")
    page.get_by_test_id("lang-switch").select_option("th")
    expect(fold).to_have_text("แชท")
    page.get_by_test_id("lang-switch").select_option("hi")
    expect(fold).to_have_attribute("aria-label", "चैट खोलें")
    page.reload()  # folded it stays
    expect(page.get_by_test_id("video")).to_have_attribute("data-state", "playing")
    expect(page.get_by_test_id("chat")).to_have_attribute("data-docked", "1")
    expect(page.get_by_test_id("chat-input")).to_be_hidden()
    page.get_by_test_id("open-chat").tap()  # the bar's Chat opens it again
    expect(page.get_by_test_id("chat-input")).to_be_visible()
    expect(page.get_by_test_id("chat")).to_be_in_viewport(ratio=1)  # the video in view
    assert inside(page, "chat", "video")
    assert not errors, errors


def test_without_a_picture_the_chat_stays_a_panel(
        studio: tuple[Server, MediaServer], phone: BrowserContext) -> None:  # noqa: F811
    server, _ = studio
    page = phone.new_page()
    page.goto(f"{server.url}table.html?table=t2")  # its stream leads nowhere
    expect(page.get_by_test_id("video")).to_have_attribute("data-state", "failed",
                                                           timeout=30_000)
    expect(page.get_by_test_id("chat")).to_have_attribute("data-docked", "0")
    expect(page.get_by_test_id("chat-input")).to_be_visible()
