"""The Bet Record's totals, counted on the server: a day's and a round's, whole.

The Bet Record is paged (``GET /api/bets``, 20 bets a page by default), and a page is not a
day: a day of 28 bets spans two pages, and a round's bets can fall either side of a page's
edge. Totals summed in the browser over the rows it happens to have loaded were wrong for
both. So each page comes with the totals of the days and rounds it shows, counted here over
all of the player's bets of those days, newest first, through the store's own paging (no
query of its own: the same call on SQLite and PostgreSQL).

Days are the player's calendar days: the page sends its offset from UTC (``tz``, minutes
east, as the browser knows it now). The walk stops once a page is wholly older than the
oldest day asked for, and after ``MAX_PAGES`` pages in any case (a player with more bets
than that in the days shown gets the totals of the newest ones; the answer says so with
``totals_partial``).
"""

from __future__ import annotations

import time

import msgspec

from livetable import protocol as p
from livetable.store.base import Store

PAGE = 200
MAX_PAGES = 50
DAY_MS = 86_400_000


class Totals(msgspec.Struct, kw_only=True):
    """A day's or a round's bets: how many, deducted, and — of those settled or refunded —
    returned and net; ``open``: bets not settled yet."""

    bets: int = 0
    deducted: int = 0
    returned: int = 0
    net: int = 0
    open: int = 0

    def add(self, bet: p.BetRecordEntry) -> None:
        self.bets += 1
        self.deducted += bet.deducted
        if bet.state == "accepted":
            self.open += 1
            return
        returned = bet.returned or 0
        self.returned += returned
        self.net += bet.net if bet.net is not None else returned - bet.deducted


class RecordTotals(msgspec.Struct, kw_only=True):
    days: dict[str, Totals]
    rounds: dict[str, Totals]
    totals_partial: bool = False


def _when(bet: p.BetRecordEntry) -> int:
    """The time the Bet Record files a bet under (as the page does): settled, else placed."""
    return bet.settled_at or bet.placed_at


def day_of(ms: int, tz_minutes: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime((ms + tz_minutes * 60_000) / 1000))


async def record_totals(store: Store, player_id: str, shown: list[p.BetRecordEntry],
                        tz_minutes: int) -> RecordTotals:
    """The totals of every day and round among ``shown``, over all the player's bets."""
    days = {day_of(_when(b), tz_minutes): Totals() for b in shown}
    rounds = {b.round_id: Totals() for b in shown}
    if not shown:
        return RecordTotals(days=days, rounds=rounds)
    # the start of the oldest day shown, on the server's clock, less an hour: a bet placed
    # before midnight may be filed under the next day (settled after it)
    oldest = min(_when(b) for b in shown)
    oldest_start = oldest - (oldest + tz_minutes * 60_000) % DAY_MS - 3_600_000
    before: str | None = None
    for _ in range(MAX_PAGES):
        page, before = await store.bet_record(player_id, PAGE, before)
        for bet in page:
            day = days.get(day_of(_when(bet), tz_minutes))
            if day is not None:
                day.add(bet)
            in_round = rounds.get(bet.round_id)
            if in_round is not None:
                in_round.add(bet)
        if before is None or all(_when(b) < oldest_start for b in page):
            return RecordTotals(days=days, rounds=rounds)
    return RecordTotals(days=days, rounds=rounds, totals_partial=True)


async def page_tips(store: Store, player_id: str, entries: list[p.BetRecordEntry],
                    next_page: str | None, before: str | None) -> list[p.TipRecordEntry]:
    """The player's tips to the dealer that go with a page of their Bet Record: those given
    in the span of time the page's bets cover (``Store.tip_record``) — from its oldest bet
    (from the start of time on the last page) to the newest bet of the page before (to now
    on the first). Paged so, every tip comes with exactly one page."""
    since = entries[-1].placed_at if next_page is not None and entries else None
    return await store.tip_record(player_id, before, since)
