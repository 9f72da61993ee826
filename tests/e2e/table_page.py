"""Page objects for the browser tests: what a player and a dealer do, in the game's words.

They drive the pages only through their data-testid hooks, the same way a person would
(chips, spots, Confirm; the dealer's card field and buttons), and read back what the page
shows.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from livetable.rules import BetSpot, hand_of, parse_cards, settle_bet

HANDS = ("P1", "P2", "P3", "P4", "P5", "BANKER")


def deducted(spot: str, amount: int) -> int:
    return amount if spot.endswith("_PAIR") else 2 * amount


@dataclass
class Bet:
    spot: str
    amount: int


class TablePage:
    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.base = base_url

    # --- navigation ----------------------------------------------------------------------

    def open(self, table: str) -> TablePage:
        self.page.goto(f"{self.base}table.html?table={table}")
        self.wait_online()
        return self

    def wait_online(self, timeout: float = 20_000) -> None:
        expect(self.page.get_by_test_id("conn-state")).to_have_attribute(
            "data-state", "online", timeout=timeout
        )

    # --- reading the page ------------------------------------------------------------------

    def balance(self) -> int:
        value = self.page.get_by_test_id("balance").get_attribute("data-value")
        assert value, "no balance shown"
        return int(value)

    def phase(self) -> str:
        return self.page.get_by_test_id("phase").get_attribute("data-phase") or ""

    def remaining_ms(self) -> int:
        return int(self.page.get_by_test_id("countdown").get_attribute("data-remaining-ms") or 0)

    def confirmed(self, spot: str) -> int:
        return int(self.page.get_by_test_id(f"stake-{spot}").get_attribute("data-confirmed") or 0)

    def cards(self, hand: str) -> list[str]:
        cards = self.page.get_by_test_id(f"cards-{hand}").locator(".card[data-card]")
        return [c.get_attribute("data-card") or "" for c in cards.all()]

    def all_cards(self) -> dict[str, list[str]]:
        """Every revealed hand, read in one go (the next round may open soon after)."""
        result: dict[str, list[str]] = self.page.evaluate(
            """(hands) => Object.fromEntries(hands.map((h) => [h, Array.from(
                document.querySelectorAll(`[data-testid=cards-${h}] .card[data-card]`),
                (c) => c.dataset.card)]))""",
            list(HANDS),
        )
        return result

    def results_on_felt(self) -> dict[str, dict[str, Any]]:
        """Each hand's cards, value and result (outcome, text) as the felt shows them, read
        in one go once every position's result is out: read one by one, the next round's
        opening (a few seconds on) once cleared them between two reads."""
        self.page.wait_for_function("""() => ['P1', 'P2', 'P3', 'P4', 'P5'].every((p) =>
            document.querySelector(`[data-testid=result-${p}]`)?.dataset.outcome)""")
        felt: dict[str, dict[str, Any]] = self.page.evaluate(
            """(hands) => Object.fromEntries(hands.map((h) => {
                const el = (id) => document.querySelector(`[data-testid=${id}-${h}]`);
                return [h, { cards: Array.from(el('cards').querySelectorAll('.card[data-card]'),
                                               (c) => c.dataset.card),
                             value: el('value').dataset.value,
                             outcome: el('result')?.dataset.outcome,
                             text: el('result')?.textContent }];
            }))""",
            list(HANDS),
        )
        return felt

    def token(self) -> str:
        kept = self.page.evaluate("() => localStorage.getItem('livetable.guest')")
        assert kept, "no guest kept in localStorage"
        return str(json.loads(kept)["token"])

    # --- betting ---------------------------------------------------------------------------

    def wait_betting(self, at_least_ms: int = 3_000, timeout: float = 60_000) -> str:
        """Wait for a round that takes bets for at least ``at_least_ms`` more; its round no."""
        self.page.wait_for_function(
            """(ms) => {
                const c = document.querySelector('[data-testid=countdown]');
                const p = document.querySelector('[data-testid=phase]');
                return c && p && p.dataset.phase === 'betting'
                    && Number(c.dataset.remainingMs) > ms;
            }""",
            arg=at_least_ms,
            timeout=timeout,
        )
        return self.page.get_by_test_id("round-no").inner_text()

    def choose_chip(self, value: int) -> None:
        self.page.get_by_test_id(f"chip-{value}").click()

    def place(self, bet: Bet, chip: int | None = None) -> None:
        """Put chips on a spot until it holds ``bet.amount`` (a chip of that value by default)."""
        chip = chip or bet.amount
        assert bet.amount % chip == 0
        self.choose_chip(chip)
        for _ in range(bet.amount // chip):
            self.page.get_by_test_id(f"spot-{bet.spot}").click()

    def confirm(self, bets: list[Bet]) -> None:
        try:
            self.page.get_by_test_id("confirm").click()
        except PlaywrightTimeoutError as e:
            raise self.unclickable() from e
        self.wait_confirmed(bets)

    def wait_confirmed(self, bets: list[Bet]) -> None:
        for b in bets:
            expect(self.page.get_by_test_id(f"stake-{b.spot}")).to_have_attribute(
                "data-confirmed", str(b.amount)
            )

    def bet(self, bets: list[Bet], at_least_ms: int = 3_000, rounds: int = 3) -> str:
        """Place and confirm ``bets`` in one round that takes bets; that round's no.

        A loaded machine can hold the page back past the countdown between the wait for the
        betting and the Confirm: the page then closes the chips as not placed, as it does for a
        player who was too slow. That round is missed, not failed, and the bets go in the next
        one; anything else fails at once, saying what the page showed.
        """
        for _ in range(rounds):
            round_no = self.wait_betting(at_least_ms)
            for b in bets:
                self.place(b)
            try:
                self.page.get_by_test_id("confirm").click(timeout=5_000)
            except PlaywrightTimeoutError as e:
                if self.missed(round_no):
                    continue
                raise self.unclickable() from e
            self.wait_confirmed(bets)
            return round_no
        raise AssertionError(f"the countdown closed before Confirm {rounds} rounds running")

    def missed(self, round_no: str) -> bool:
        """Round ``round_no`` stopped taking bets before they were confirmed: the page shows
        the chips as not placed, or the round is no longer the one taking bets."""
        unplaced = self.page.locator("[data-testid^=unplaced-]").count() > 0
        closed = self.phase() != "betting" or self.remaining_ms() <= 0
        return unplaced or closed or self.page.get_by_test_id("round-no").inner_text() != round_no

    def unclickable(self) -> AssertionError:
        return AssertionError(f"Confirm could not be clicked; the page: {self.state()}")

    def state(self) -> dict[str, Any]:
        """What the page shows of the betting: for a failure's message."""
        shown: dict[str, Any] = self.page.evaluate(
            """() => {
                const at = (id, a) =>
                    document.querySelector(`[data-testid=${id}]`)?.getAttribute(a);
                return {
                    phase: at('phase', 'data-phase'),
                    round: document.querySelector('[data-testid=round-no]')?.textContent,
                    remaining_ms: at('countdown', 'data-remaining-ms'),
                    connection: at('conn-state', 'data-state'),
                    confirm_disabled: document.querySelector('#btn-confirm')?.disabled,
                    unplaced: Array.from(document.querySelectorAll('[data-testid^=unplaced-]'),
                        (e) => e.textContent),
                    warning: document.querySelector('[data-testid=bet-warning]')?.textContent,
                    error: document.querySelector('[data-testid=bet-error]')?.textContent,
                };
            }"""
        )
        return shown

    def wait_hand(self, hand: str, timeout: float = 60_000) -> None:
        expect(self.page.get_by_test_id(f"hand-{hand}")).to_have_attribute(
            "data-revealed", "1", timeout=timeout
        )


def expected_returned(bets: list[Bet], cards: dict[str, list[str]]) -> int:
    """What the rules return for these bets, given the revealed cards."""
    banker = hand_of(parse_cards(" ".join(cards["BANKER"])))
    total = 0
    for b in bets:
        spot = BetSpot(b.spot)
        position = hand_of(parse_cards(" ".join(cards[spot.position.value])))
        total += settle_bet(spot, b.amount, position, banker).returned
    return total


def get_json(url: str, token: str | None = None, timeout: float = 5.0) -> Any:
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


def wait_until(predicate: Callable[[], bool], timeout: float = 60.0, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(every)


def livetable_command() -> list[str]:
    """The ``livetable`` console script of this environment."""
    exe = Path(sys.executable).with_name("livetable")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("livetable")
    return [found] if found else [sys.executable, "-m", "livetable.cli"]


@dataclass
class Server:
    """A running livetable server: its URL, environment and data directory."""

    url: str
    env: dict[str, str]
    data: Path | None
    process: subprocess.Popen[bytes] | None

    def api(self, path: str) -> Any:
        return get_json(self.url.rstrip("/") + path)

    def dealer_token(self, kind: str = "dealer", tables: str = "*", name: str = "Dee") -> str:
        """A staff token minted by ``livetable token --dealer`` (or ``--supervisor``) with the
        server's secret, for ``tables`` (comma-separated ids, or "*" for every table)."""
        given = os.environ.get("LIVETABLE_E2E_DEALER_TOKEN")
        if given and kind == "dealer":
            return given
        scope = ["--all-tables"] if tables == "*" else ["--tables", tables]
        cmd = [*livetable_command(), "token", f"--{kind}", *scope, "--player", f"{kind}-1",
               "--name", name]
        if self.data is not None:
            cmd += ["--data-dir", str(self.data)]
        out = subprocess.run(cmd, env=self.env, capture_output=True, text=True, check=True)
        text = out.stdout.strip()
        with contextlib.suppress(ValueError):
            parsed = json.loads(text)
            if isinstance(parsed, dict) and "token" in parsed:
                return str(parsed["token"])
        return text.splitlines()[-1].strip()
