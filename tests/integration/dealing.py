"""The test as the dealer: rounds on a manual-mode server, dealt the moment a test asks.

On an auto server a test waits for the table's clock: for the next round to open, for its
betting to close, for each reveal. A test whose subject is not that clock deals instead, on
a manual server over ``/ws/dealer``: it opens the betting, feeds the thirteen cards it chose
(so it knows the outcome before the reveal), closes the betting and reveals — each command
answered only after its event went out, so the test is in the phase it needs at once, and a
step "between two reveals" is exactly there, not raced against a timer.

Each round comes from a shoe of its own (start the shoe, read its opening card): the same
cards can be dealt in every round of a session, and the table is between rounds again when
a test is done, as a quiet manual table should be for the next one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from liveserver import HANDS, TABLE, LiveServer, WireClient

Frame = dict[str, Any]

#: The shoe's opening card: it burns nine, and is no card of the round.
OPENING = "9C"
#: burn, then P1 … P5, Banker twice (docs/design.md §1's dealing order): against the Banker's 5,
#: P1 has a two-card nine of one suit, P2 a pair of queens (0), P3 a pair of threes (6),
#: P4 a 7 and P5 a two-card eight — wins, a loss and two pairs in one round.
#: No card here is one of test_server_dealt_in_betting's round: that test searches a fresh
#: welcome, which shows the last round's hands, for its own cards.
BURN = "4D"
FIRST = ["4H", "QC", "3C", "AC", "8S", "5D"]
SECOND = ["5H", "QD", "3H", "6S", "KD", "JS"]
ROUND = [BURN, *FIRST, *SECOND]
HAND_CARDS = {h: [a, b] for h, a, b in zip(HANDS, FIRST, SECOND, strict=True)}


async def between_rounds(console: WireClient, server: LiveServer) -> None:
    """Leave the table between rounds, in manual mode, whatever an earlier test left it in
    (in any order: a fuzzing test may have paused it or switched it to auto)."""
    table = server.get(f"/api/tables/{TABLE}").json()
    if table["phase"] == "paused":
        ack = await console.command("resume")
        assert ack["type"] == "ack", ack
        table = server.get(f"/api/tables/{TABLE}").json()
    if table["phase"] not in ("idle", "settled", "cancelled"):
        ack = await console.command("cancel_round", reason="test setup")
        assert ack["type"] == "ack", ack
    if table["mode"] == "auto":
        ack = await console.command("set_mode", auto=False)
        assert ack["type"] == "ack", ack


class Dealer:
    """A dealer console that deals :data:`ROUND` (or the cards it is given) round by round."""

    def __init__(self, server: LiveServer, console: WireClient,
                 cards: list[str] | None = None) -> None:
        self.server = server
        self.console = console
        self.cards = list(ROUND if cards is None else cards)
        assert len(self.cards) == 1 + 2 * len(HANDS), self.cards
        self.dealt = 0
        self.revealed = 0

    async def do(self, cmd: str, **fields: Any) -> Frame:
        """A command that must be taken; its ack."""
        answer = await self.console.command(cmd, **fields)
        assert answer["type"] == "ack" and answer["cmd"] == cmd, (cmd, fields, answer)
        return answer

    async def open_round(self, betting_ms: int = 60_000) -> Frame:
        """A new shoe and its first round's betting; the ``round_opened`` everyone got.

        ``betting_ms`` is the countdown: long by default, so that the betting closes only
        when the test closes it.
        """
        await between_rounds(self.console, self.server)
        await self.do("start_shoe")
        await self.do("card", card=OPENING)
        return await self.next_round(betting_ms)

    async def next_round(self, betting_ms: int = 60_000) -> Frame:
        """The next round of the same shoe (after a settled or cancelled one)."""
        await self.do("open_betting", betting_ms=betting_ms)
        self.dealt = self.revealed = 0
        return self.console.of_type("round_opened")[-1]  # announced before the ack

    async def deal(self, count: int | None = None) -> None:
        """The round's next ``count`` cards (every card left if None), face down."""
        left = self.cards[self.dealt:]
        for card in left if count is None else left[:count]:
            await self.do("card", card=card)
            self.dealt += 1

    async def close_betting(self) -> None:
        await self.do("close_betting")

    async def reveal(self, count: int | None = None) -> None:
        """The next ``count`` hands (every hand left if None); the Banker's settles."""
        for _ in range(len(HANDS) - self.revealed if count is None else count):
            await self.do("reveal")
            self.revealed += 1

    async def finish(self) -> None:
        """Deal what is left, close the betting if it is still open, reveal every hand."""
        await self.deal()
        if self.server.get(f"/api/tables/{TABLE}").json()["phase"] == "betting":
            await self.close_betting()
        await self.reveal()


@contextlib.asynccontextmanager
async def dealing(server: LiveServer, cards: list[str] | None = None
                  ) -> AsyncIterator[Dealer]:
    """A dealer console on ``server`` (manual mode); the table is between rounds after."""
    token = server.dealer_token()  # first: a connection must say hello in time
    console = await WireClient.connect(server.ws_dealer, "dealing console")
    try:
        await console.hello(token)
        yield Dealer(server, console, cards)
        await between_rounds(console, server)
    finally:
        await console.close()
