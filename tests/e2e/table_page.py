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
        self.page.get_by_test_id("confirm").click()
        for b in bets:
            expect(self.page.get_by_test_id(f"stake-{b.spot}")).to_have_attribute(
                "data-confirmed", str(b.amount)
            )

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
