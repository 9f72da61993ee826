"""A deterministic simulation of a table: thousands of rounds with faults, from one seed.

The way TigerBeetle checks its ledger: drive the real components — the sans-IO
:class:`TableEngine` and a real :class:`Store` — through randomized schedules that a live
table could see, inject the faults a live table can suffer, and check the invariants after
every round against an independent model. Everything random comes from one
``random.Random(seed)`` (the engine's shuffles too), and time is a number the harness moves,
so a failing seed replays exactly.

The harness plays every part the runner, the dealer and the players would:

* **the runner** — ticks the engine at :meth:`TableEngine.next_deadline` (sometimes late),
  commits every step to the store with ``commit_step`` exactly as the runner does, before
  anything would be announced;
* **crashes** — the process dies between steps, or *between an engine step and its commit*
  (the step is lost: it was never stored, so never announced). Either way a new engine is
  rebuilt from what the store kept (``TableEngine.from_bytes(await store.load_table(...))``)
  and ``recover(now)`` settles or cancels the round in flight;
* **the dealer** — pauses, resumes, cancels, closes betting early, switches between auto and
  manual mode; in manual mode deals a physical 8-deck shoe card by card (the cut card
  included) and now and then mis-scans an impossible card (a ninth copy), which pauses the
  round; and tries commands that are illegal now (each must change nothing);
* **200 players** — valid bets, bets refused for every reason, retries of the same bet,
  re-used bet ids, bets on closed, unknown and foreign rounds, high rollers up to the
  limits, several players betting at the same instant (one group commit), and deposits.

The model (:class:`Ledger`) follows only what the store committed. It predicts every answer
to ``place_bet`` (accepted with this balance, or refused with this code), and at the end of
every round it checks: every accepted bet settled or refunded exactly once; each amount
equal to :func:`settle_bet` on the round's cards as the store keeps them (``round_view``),
which must be the cards announced by ``hand_revealed``; the balance of every player of the
round, in ``bet_settled`` and in the store; the shoe's last round against the cut card; and
the events numbered +1 with no gap across crashes. ``audit()`` (conservation and the double
entry, over every transfer) runs after each of the first ``audit_first`` rounds, then every
``audit_every`` rounds and at the end, and must agree with the model's house and deposits;
it reads the whole ledger, so running it after every round of a long run costs time
quadratic in the run (``audit_every=1`` does it).
"""

from __future__ import annotations

import asyncio
import random
import re
import time
import typing
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bets import place_bet

from livetable import protocol as p
from livetable.betting.slips import MAX_AMOUNT, MAX_BET_ID, BetRequest, spot_limits
from livetable.engine import (
    TRANSITIONS,
    CancelRound,
    Command,
    EngineError,
    OpenRound,
    RevealShoe,
    SetBetting,
    SettleRound,
    Step,
    TableEngine,
    Timing,
    allowed_in,
)
from livetable.engine.state import Mode
from livetable.rules import (
    BET_SPOTS,
    DECK,
    PLAYER_POSITIONS,
    BetSpot,
    Hand,
    Position,
    SpotResult,
    hand_of,
    parse_cards,
    settle_bet,
    settle_round,
)
from livetable.rules.fairness import check_shoe
from livetable.store import Settled, Store

T0 = 1_700_000_000_000
CARD_TOKEN = re.compile(r"(?<![0-9A-Za-z])(?:10|[2-9AJQK])[SHDC](?![0-9A-Za-z])")
CARD_BYTES = re.compile(CARD_TOKEN.pattern.encode())
#: Frames that may name a card: a revealed hand, the face-up opening card, and a pause whose
#: reason names the impossible card the scanner read (not a card of the round).
MAY_NAME_CARDS: frozenset[type[p.TableEvent]] = frozenset(
    {p.HandRevealed, p.ShoeStarted, p.TablePaused})


class SimulationFailure(AssertionError):
    """An invariant broke. The message says which, with the seed and the round."""


@dataclass
class SimConfig:
    seed: int = 1
    rounds: int = 10_000
    players: int = 200
    table: str = "sim"
    #: Mean bet actions per betting window (an action is one bet, or a burst of them).
    bets_per_round: float = 2.0
    #: Ticks on time; else late by up to 400 ms (10 %), or by up to ``tick_late_ms``.
    tick_on_time: float = 0.5
    tick_late_ms: int = 3_000
    #: Per harness action: the process dies between two steps.
    crash_rate: float = 0.002
    #: Per committed step: the process dies after the engine step, before its commit.
    lose_step_rate: float = 0.002
    #: Per harness action: the dealer tries a command that must be refused.
    refused_rate: float = 0.01
    #: Per betting window / per dealing or revealing action: a pause.
    pause_in_betting: float = 0.03
    pause_in_play: float = 0.002
    cancel_in_betting: float = 0.005
    cancel_in_play: float = 0.0005
    #: While paused, the dealer cancels rather than resumes with this probability.
    cancel_when_paused: float = 0.2
    #: Between rounds: switch auto → manual, and manual → auto.
    to_manual: float = 0.006
    to_auto: float = 0.025
    #: Per manual card: the scanner reads an impossible card (if one exists yet).
    impossible_card: float = 0.05
    #: Per manual card: the scanner misreads it (a valid, wrong card), and the dealer voids
    #: it with a supervisor's approval before scanning it again.
    misread_card: float = 0.02
    #: Per harness action while betting is open in manual mode: the dealer deals a card
    #: (the sheet deals during the countdown; a slow dealer finishes after it).
    deal_in_betting: float = 0.5
    #: Per bet action: several players bet at the same instant (one group commit).
    burst: float = 0.3
    #: audit() after each of the first ``audit_first`` rounds, then every ``audit_every``
    #: rounds, and at the end (an audit reads every transfer: it grows with the run).
    audit_first: int = 100
    audit_every: int = 500
    #: Every this many rounds, also read back each player's settlements and Bet Record.
    deep_every: int = 10
    #: Per settlement chunk after a round's first: the process dies before it (the store is
    #: reopened; the next chunk is the new runner's).
    settle_crash_rate: float = 0.2


@dataclass
class Stats:
    rounds: int = 0
    settled: int = 0
    cancelled: int = 0
    manual_rounds: int = 0
    last_rounds: int = 0
    shoes: int = 0
    steps: int = 0
    events: int = 0
    crashes: int = 0
    lost_steps: int = 0
    chunks: int = 0  # settlement chunks after the settling step's own
    settle_crashes: int = 0
    recovered_settled: int = 0
    pauses: int = 0
    impossible_cards: int = 0
    corrections: int = 0
    cards_in_betting: int = 0
    cut_cards: int = 0
    refused_commands: int = 0
    bets_accepted: int = 0
    retries: int = 0
    deposits: int = 0
    audits: int = 0
    verified_shoes: int = 0
    rejections: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    def summary(self) -> str:
        codes = ", ".join(f"{k} {v}" for k, v in sorted(self.rejections.items()))
        return (
            f"{self.rounds} rounds ({self.settled} settled, {self.cancelled} cancelled, "
            f"{self.manual_rounds} manual, {self.shoes} shoes ({self.verified_shoes} revealed "
            f"and verified), {self.last_rounds} last rounds) "
            f"in {self.seconds:.1f} s ({self.cpu_seconds:.1f} s CPU); {self.steps} steps, "
            f"{self.events} events; "
            f"{self.crashes} crashes ({self.lost_steps} lost steps, {self.recovered_settled} "
            f"rounds settled after a crash, {self.settle_crashes} in the middle of a chunked "
            f"settlement of {self.chunks} chunks); {self.pauses} pauses, {self.corrections} "
            f"corrections, {self.cards_in_betting} cards dealt while betting, "
            f"{self.impossible_cards} "
            f"impossible cards, {self.cut_cards} cut cards, {self.refused_commands} refused "
            f"commands; {self.bets_accepted} bets accepted, {self.retries} retries answered "
            f"identically, {self.deposits} deposits, {self.audits} audits; rejected: {codes}"
        )


# --- the model -------------------------------------------------------------------------------


@dataclass(slots=True)
class BetModel:
    player: str
    bet_id: str
    round_id: str
    spot: str
    amount: int
    deducted: int
    answer: p.BetAccepted
    settled: int = 0  # how many bet_settled the store produced for it (must end at 1)


@dataclass
class RoundModel:
    round_id: str
    table: str
    status: str  # betting paused closed settled cancelled
    closes_at: int | None
    limits: p.Limits
    manual: bool
    bets: list[BetModel] = field(default_factory=list)
    on_spot: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    on_round: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def ended(self) -> bool:
        return self.status in ("settled", "cancelled")


@dataclass
class Ledger:
    """What the store must hold, from what was committed and what was accepted."""

    balances: dict[str, int] = field(default_factory=dict)
    house: int = 0
    deposits: int = 0
    deposit_ids: set[str] = field(default_factory=set)
    rounds: dict[str, RoundModel] = field(default_factory=dict)
    bets: dict[tuple[str, str], BetModel] = field(default_factory=dict)
    by_player: dict[str, list[BetModel]] = field(default_factory=lambda: defaultdict(list))

    def answer(self, bet: BetRequest, now: int) -> p.BetAccepted | str:
        """The answer the store must give: the same check order as the contract's stores."""
        if not 0 < len(bet.bet_id) <= MAX_BET_ID:
            return "bad_bet_id"
        if bet.spot not in BetSpot.__members__:
            return "bad_spot"
        if not 0 < bet.amount <= MAX_AMOUNT:
            return "bad_amount"
        prior = self.bets.get((bet.player_id, bet.bet_id))
        if prior is not None:
            if (prior.round_id, prior.spot, prior.amount) == (bet.round_id, bet.spot,
                                                               bet.amount):
                return prior.answer
            return "duplicate_bet_id"
        r = self.rounds.get(bet.round_id)
        if r is None or r.table != bet.table:
            return "unknown_round"
        if r.status == "paused":
            return "paused"
        if r.status not in ("betting", "closed") or r.closes_at is None or now >= r.closes_at:
            return "betting_closed"
        low, high = spot_limits(r.limits, bet.spot)
        if bet.amount < low:
            return "below_min"
        if r.on_spot[(bet.player_id, bet.spot)] + bet.amount > high:
            return "above_max"
        deducted = bet.amount * BetSpot(bet.spot).deducted_multiple
        if r.on_round[bet.player_id] + deducted > r.limits.round_max:
            return "round_limit"
        balance = self.balances.get(bet.player_id)
        if balance is None:
            return "not_a_player"
        if balance < deducted:
            return "insufficient_funds"
        return p.BetAccepted(bet_id=bet.bet_id, round_id=bet.round_id, spot=bet.spot,
                             amount=bet.amount, deducted=deducted, balance=balance - deducted)

    def accept(self, bet: BetRequest, answer: p.BetAccepted) -> BetModel:
        r = self.rounds[bet.round_id]
        model = BetModel(bet.player_id, bet.bet_id, bet.round_id, bet.spot, bet.amount,
                         answer.deducted, answer)
        r.bets.append(model)
        r.on_spot[(bet.player_id, bet.spot)] += bet.amount
        r.on_round[bet.player_id] += answer.deducted
        self.bets[(bet.player_id, bet.bet_id)] = model
        self.by_player[bet.player_id].append(model)
        self.balances[bet.player_id] -= answer.deducted
        return model


# --- the dealer's physical shoe ----------------------------------------------------------------


class PhysicalShoe:
    """Eight shuffled decks and a cut card, as a manual table's dealer holds them."""

    def __init__(self, rng: random.Random) -> None:
        self.cards = [str(card) for card in DECK for _ in range(8)]
        rng.shuffle(self.cards)
        self.cut_at = len(self.cards) - rng.randint(52, 78)
        self.next = 0

    @property
    def cut_passed(self) -> bool:
        return self.next >= self.cut_at

    def peek(self) -> str:
        if self.next >= len(self.cards):
            raise SimulationFailure("the physical shoe ran out: the cut card was not honoured")
        return self.cards[self.next]

    def take(self, count: int = 1) -> None:
        self.next += count


# --- the simulation ----------------------------------------------------------------------------


class Simulation:
    def __init__(
        self,
        store: Store,
        config: SimConfig,
        reopen: Callable[[Store], Awaitable[Store]] | None = None,
    ) -> None:
        """``reopen(old)`` makes the store a restarted process would open (after a crash);
        without it the store object survives the crash (its data does either way)."""
        self.store = store
        self.cfg = config
        self.reopen = reopen
        self.rng = random.Random(config.seed)
        self.stats = Stats()
        self.model = Ledger()
        self.now = T0
        # no close grace: the simulation's figures were set with betting closing at
        # closes_at (the engine's default grace is the server's, 1 s)
        self.engine = TableEngine.new(config.table, rng=self._engine_rng(),
                                      timing=Timing(close_grace_ms=0))
        self.players = [f"p{n:03d}" for n in range(config.players)]
        self.seq = 0
        self.epoch = self.engine.state.epoch
        self.current_round: str | None = None  # the last round announced (committed)
        self.previous_round: str | None = None
        self.hands: dict[str, dict[str, list[str]]] = defaultdict(dict)
        self.shoe: PhysicalShoe | None = None
        self.bet_no = 0
        self.recovering_round: str | None = None
        self._audited_at = 0
        self.last_cards: dict[str, list[str]] = {}
        #: After a round ended: must the next auto round open a new shoe? (None: unknown)
        self.new_shoe_next: bool | None = None
        #: Auto shoes: the commitment announced in shoe_started; the shoes revealed since.
        self.commitments: dict[str, str] = {}
        self.revealed_shoes: set[str] = set()

    # --- plumbing ----------------------------------------------------------------------------

    def _engine_rng(self) -> random.Random:
        return random.Random(self.rng.getrandbits(64))

    def fail(self, message: str) -> SimulationFailure:
        return SimulationFailure(
            f"seed {self.cfg.seed}, round {self.stats.rounds} ({self.current_round}), "
            f"t={self.now - T0}: {message}")

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            raise self.fail(message)

    async def run(self) -> Stats:
        started, cpu = time.perf_counter(), time.process_time()
        await self._setup()
        while self.stats.rounds < self.cfg.rounds:
            await self._act()
        await self._finish()
        self.stats.seconds = time.perf_counter() - started
        self.stats.cpu_seconds = time.process_time() - cpu
        return self.stats

    async def _setup(self) -> None:
        for pid in self.players:
            roll = self.rng.random()
            initial = (self.rng.randint(5_000, 60_000) if roll < 0.7 else
                       self.rng.randint(10, 2_500) if roll < 0.9 else 0)
            view = await self.store.ensure_player(pid, pid.upper(), initial, self.now)
            self.check(view.balance == initial, f"{pid} opened with {view.balance}")
            self.model.balances[pid] = initial
            self.model.deposits += initial
        await self.store.commit_step(self.cfg.table, self.engine.to_bytes(), [], [], self.now)
        await self._call(self.engine.open_betting)

    async def _call(self, command: Callable[..., Step], *args: Any, **kwargs: Any) -> None:
        """A dealer's (or the clock's) command at ``now``, committed; refusals must be known."""
        try:
            step = command(*args, now=self.now, **kwargs)
        except EngineError as error:
            if error.step is None:
                raise self.fail(f"unexpected refusal {error.code}: {error.message}") from None
            step = error.step
        await self._commit(step)

    async def _commit(self, step: Step) -> None:
        """Commit ``step`` as the runner would — unless the process dies first."""
        if self.rng.random() < self.cfg.lose_step_rate:
            self.stats.lost_steps += 1
            await self._crash()
            return
        frames = [(ev.epoch, ev.seq, p.encode(ev)) for ev in step.events]
        settled = await self.store.commit_step(self.cfg.table, self.engine.to_bytes(), frames,
                                               step.effects, self.now)
        self.stats.steps += 1
        if any(isinstance(e, SettleRound | CancelRound) for e in step.effects):
            settled += await self._settle_rest()
        await self._committed(step, frames, settled)

    async def _settle_rest(self) -> list[Settled]:
        """The round's bets past the settling step's chunk, chunk by chunk as the runner's
        settlement task takes them — with the process dying between two chunks now and
        then (the next process goes on from what the store kept)."""
        settled: list[Settled] = []
        while True:
            if self.rng.random() < self.cfg.settle_crash_rate:
                self.stats.settle_crashes += 1
                if self.reopen is not None:
                    self.store = await self.reopen(self.store)
            chunk, more = await self.store.settle_pending(self.cfg.table, self.now)
            self.stats.chunks += bool(chunk)
            settled += chunk
            if not more:
                return settled

    async def _crash(self) -> None:
        self.stats.crashes += 1
        self.now += self.rng.randint(50, 5_000)
        if self.reopen is not None:
            self.store = await self.reopen(self.store)
        data = await self.store.load_table(self.cfg.table)
        self.check(data is not None, "the store lost the table's state")
        assert data is not None
        self.engine = TableEngine.from_bytes(data, rng=self._engine_rng())
        phase = self.engine.phase
        underlying = self.engine.state.paused_from if phase == "paused" else phase
        self.recovering_round = self.engine.state.round_id if underlying == "revealing" else None
        step = self.engine.recover(self.now)
        ends = [ef for ef in step.effects if isinstance(ef, SettleRound | CancelRound)]
        if underlying in ("betting", "dealing"):
            self.check(len(ends) == 1 and isinstance(ends[0], CancelRound),
                       f"recover from {phase}/{underlying} did not cancel: {step.effects}")
        else:
            self.check(ends == [], f"recover from {phase}/{underlying} ended a round: {ends}")
        await self._commit(step)

    # --- what was committed ---------------------------------------------------------------

    async def _committed(self, step: Step, frames: list[tuple[int, int, bytes]],
                         settled: list[Settled]) -> None:
        for ev, (_, _, frame) in zip(step.events, frames, strict=True):
            self.check(ev.epoch == self.epoch and ev.seq == self.seq + 1,
                       f"event {ev.epoch}/{ev.seq} after {self.epoch}/{self.seq}")
            self.seq = ev.seq
            self.stats.events += 1
            kind = type(ev)
            if isinstance(ev, p.ShoeRevealed):
                # Every card of the shoe, once it has ended: checked with its RevealShoe below.
                self.check(ev.shoe_id in self.commitments, f"{ev.shoe_id} revealed, never "
                                                           "committed")
                continue
            if kind not in MAY_NAME_CARDS and CARD_BYTES.search(frame):
                raise self.fail(f"a card identity before its reveal: {frame!r}")
            if kind is p.CardDealt:
                continue
            if isinstance(ev, p.HandRevealed):
                self.check(sorted(CARD_TOKEN.findall(frame.decode())) == sorted(ev.cards),
                           f"a hand_revealed names other cards: {frame!r}")
                self.check(ev.hand not in self.hands[ev.round_id], f"{ev.hand} revealed twice")
                self.hands[ev.round_id][ev.hand] = ev.cards
            elif isinstance(ev, p.RoundSettled):
                # The last round of a shoe is the one in which the cut card came out (or
                # the first to open after it): then, and only then, a new shoe follows.
                shoe = self.engine.state.shoe
                caught_up = any(isinstance(e, p.ShoeStarted) for e in step.events)
                self.check(caught_up or (shoe is not None and ev.last_round == shoe.cut_out),
                           f"last_round {ev.last_round} with the cut card "
                           f"{'out' if shoe and shoe.cut_out else 'in'}")
                self.new_shoe_next = ev.last_round
            elif isinstance(ev, p.RoundCancelled):
                self.new_shoe_next = self.engine.state.last_round
            elif isinstance(ev, p.RoundOpened) and self.engine.state.mode == "auto":
                if self.new_shoe_next is not None:
                    started = any(isinstance(e, p.ShoeStarted) for e in step.events)
                    self.check(started == self.new_shoe_next,
                               f"a new shoe {'did not start' if not started else 'started'} "
                               f"{'after' if self.new_shoe_next else 'before'} the last round")
                self.new_shoe_next = None
            elif isinstance(ev, p.ShoeStarted):
                self.stats.shoes += 1
                auto = self.engine.state.mode == "auto"
                self.check((ev.commitment is not None) == auto,
                           f"a {'n auto' if auto else ' manual'} shoe with commitment "
                           f"{ev.commitment}")
                if ev.commitment is not None:
                    self.commitments[ev.shoe_id] = ev.commitment
            elif isinstance(ev, p.TablePaused):
                self.stats.pauses += 1
        if step.detail is not None and "mode" in step.detail:
            self.new_shoe_next = None  # a new mode, a new shoe
        by_round: dict[str, list[Settled]] = defaultdict(list)
        for s in settled:
            by_round[s.message.round_id].append(s)
        for effect in step.effects:
            if isinstance(effect, OpenRound):
                self._opened(effect)
            elif isinstance(effect, SetBetting):
                r = self.model.rounds[effect.round_id]
                if not r.ended:
                    # a closed round keeps its deadline (a dealer's early close moves it
                    # to the close): bets that arrived in time are still taken
                    r.closes_at = (effect.closes_at if effect.status != "closed"
                                   else None if r.closes_at is None
                                   else min(r.closes_at, self.now))
                    r.status = effect.status
            elif isinstance(effect, SettleRound):
                announced = [ev for ev in step.events if isinstance(ev, p.RoundSettled)
                             and ev.round_id == effect.round_id]
                self.check(len(announced) == 1, f"{effect.round_id}: {len(announced)} "
                                                "round_settled with its settlement")
                await self._settled(effect, announced[0], by_round.pop(effect.round_id, []))
            elif isinstance(effect, CancelRound):
                await self._cancelled(effect, by_round.pop(effect.round_id, []))
            elif isinstance(effect, RevealShoe):
                await self._revealed(effect, step)
        self.check(not by_round, f"bet_settled for rounds that did not end: {list(by_round)}")

    async def _revealed(self, effect: RevealShoe, step: Step) -> None:
        """A shoe revealed (docs/design.md §7): only once every round of it has ended, exactly as
        announced, and fair by the same check ``livetable verify-shoe`` runs — against the
        commitment announced when the shoe started and the cards the store kept."""
        shoe_id = effect.shoe_id
        announced = [ev for ev in step.events if isinstance(ev, p.ShoeRevealed)]
        self.check([(ev.shoe_id, ev.salt, ev.cut_at, ev.order) for ev in announced]
                   == [(shoe_id, effect.salt, effect.cut_at, effect.order)],
                   f"{shoe_id}: shoe_revealed {announced} with its RevealShoe")
        self.check(shoe_id not in self.revealed_shoes, f"{shoe_id} revealed twice")
        self.revealed_shoes.add(shoe_id)
        open_rounds = [rid for rid, r in self.model.rounds.items()
                       if rid.startswith(shoe_id + ".") and not r.ended]
        self.check(not open_rounds, f"{shoe_id} revealed with {open_rounds} not ended")
        record = await self.store.shoe_view(shoe_id)
        self.check(record is not None, f"{shoe_id}: no shoe_view after its reveal")
        assert record is not None
        self.check([r.round_id for r in record.rounds]
                   == [rid for rid in self.model.rounds if rid.startswith(shoe_id + ".")],
                   f"{shoe_id}: rounds {[r.round_id for r in record.rounds]}")
        problems = check_shoe(record, seen_commitment=self.commitments[shoe_id])
        self.check(problems == [], f"{shoe_id} does not verify: {problems}")
        self.stats.verified_shoes += 1

    def _opened(self, effect: OpenRound) -> None:
        self.check(effect.round_id not in self.model.rounds,
                   f"round {effect.round_id} opened twice")
        self.check(effect.shoe_id not in self.revealed_shoes,
                   f"{effect.round_id} opened in {effect.shoe_id}, revealed already")
        self.model.rounds[effect.round_id] = RoundModel(
            effect.round_id, effect.table, "betting", effect.closes_at, effect.limits,
            manual=self.engine.state.mode == "manual")
        self.previous_round, self.current_round = self.current_round, effect.round_id

    def _check_results(self, ev: p.RoundSettled, spots: dict[BetSpot, SpotResult],
                       hands: dict[Position, Hand]) -> None:
        expected = [(pos.value, spots[BetSpot(pos.value)].outcome, spots[BetSpot(pos.value)].odds,
                     hands[pos].pair, hands[pos].flush) for pos in PLAYER_POSITIONS]
        got = [(r.hand, r.outcome, r.odds, r.pair, r.flush) for r in ev.results]
        self.check(got == expected, f"round_settled results {got}, the rules say {expected}")
        self.stats.last_rounds += ev.last_round

    def _end(self, round_id: str, status: str) -> RoundModel:
        r = self.model.rounds.get(round_id)
        self.check(r is not None, f"{status} a round never opened: {round_id}")
        assert r is not None
        self.check(not r.ended, f"{round_id} {status} after it was {r.status}: never both")
        r.status = status
        self.stats.rounds += 1
        self.stats.manual_rounds += r.manual
        return r

    async def _settled(self, effect: SettleRound, announced: p.RoundSettled,
                       settled: list[Settled]) -> None:
        r = self._end(effect.round_id, "settled")
        self.stats.settled += 1
        if effect.round_id == self.recovering_round:
            self.stats.recovered_settled += 1
        hands = self.hands.pop(effect.round_id, {})
        self.check(list(hands) == [pos.value for pos in (*PLAYER_POSITIONS, Position.BANKER)],
                   f"settled after revealing {list(hands)}")
        self.check(effect.cards == hands, "the settled cards are not the revealed cards")
        # Independently of the engine: the cards the store keeps for the round, by the rules.
        view = await self.store.round_view(effect.round_id)
        self.check(view is not None and view.state == "settled", f"round_view {view}")
        assert view is not None
        self.check(view.cards == hands, f"stored cards {view.cards} ≠ revealed {hands}")
        stored = {Position(k): hand_of(parse_cards(" ".join(v))) for k, v in hands.items()}
        self.last_cards = hands
        spots = settle_round(stored)
        rules = {k.value: (v.outcome, v.odds, v.returned_multiple) for k, v in spots.items()}
        self.check({k: tuple(v) for k, v in effect.spots.items()} == rules,
                   "the SettleRound spots are not the rules'")
        self._check_results(announced, spots, stored)
        expected: dict[tuple[str, str], tuple[str, int, int]] = {}
        for b in r.bets:
            spot = BetSpot(b.spot)
            s = settle_bet(spot, b.amount, stored[spot.position], stored[Position.BANKER])
            self.check(s.deducted == b.deducted, f"{b.bet_id} deducted {b.deducted}")
            expected[(b.player, b.bet_id)] = (s.outcome, s.odds, s.returned)
            self.model.balances[b.player] += s.returned
            self.model.house += b.deducted - s.returned
        await self._check_ended(r, settled, expected)

    async def _cancelled(self, effect: CancelRound, refunds: list[Settled]) -> None:
        r = self._end(effect.round_id, "cancelled")
        self.stats.cancelled += 1
        self.hands.pop(effect.round_id, None)
        view = await self.store.round_view(effect.round_id)
        self.check(view is not None and view.state == "cancelled", f"round_view {view}")
        expected: dict[tuple[str, str], tuple[str, int, int]] = {}
        for b in r.bets:
            expected[(b.player, b.bet_id)] = ("refund", 0, b.deducted)
            self.model.balances[b.player] += b.deducted
        await self._check_ended(r, refunds, expected)

    async def _check_ended(self, r: RoundModel, messages: list[Settled],
                           expected: dict[tuple[str, str], tuple[str, int, int]]) -> None:
        got: dict[tuple[str, str], tuple[str, int, int]] = {}
        last_balance: dict[str, int] = {}
        for s in messages:
            m = s.message
            key = (s.player_id, m.bet_id)
            self.check(key not in got, f"{key} settled twice in one commit")
            got[key] = (m.outcome, m.odds, m.returned)
            bet = self.model.bets.get(key)
            self.check(bet is not None and bet.round_id == r.round_id,
                       f"bet_settled for a bet never accepted in {r.round_id}: {key}")
            assert bet is not None
            self.check((m.spot, m.amount) == (bet.spot, bet.amount), f"{key}: {m}")
            bet.settled += 1
            last_balance[s.player_id] = m.balance
        self.check(got == expected, f"{r.round_id}: the store paid {got}, the rules say "
                                    f"{expected}")
        self.check(all(b.settled == 1 for b in r.bets), f"{r.round_id}: not exactly once")
        for pid, balance in last_balance.items():
            self.check(balance == self.model.balances[pid],
                       f"{pid}: bet_settled says {balance}, the model {self.model.balances[pid]}")
            view = await self.store.player(pid)
            self.check(view is not None and view.balance == self.model.balances[pid],
                       f"{pid} holds {view}, the model says {self.model.balances[pid]}")
            if self.stats.rounds % self.cfg.deep_every == 0:
                await self._read_back(pid, r, [m.message for m in messages
                                               if m.player_id == pid])
        if (self.stats.rounds <= self.cfg.audit_first
                or self.stats.rounds - self._audited_at >= self.cfg.audit_every):
            await self._audit()

    async def _read_back(self, pid: str, r: RoundModel, mine: list[p.BetSettled]) -> None:
        """What a player reads of the round: after a resume, and in the Bet Record."""
        want = {m.bet_id: (m.outcome, m.odds, m.returned) for m in mine}
        stored = await self.store.settlements_for_rounds(pid, [r.round_id])
        self.check({m.bet_id: (m.outcome, m.odds, m.returned) for m in stored} == want,
                   f"{pid}: settlements_for_rounds disagrees with bet_settled")
        # The round's bets are the player's newest: the first page of the Bet Record.
        bets = [b for b in r.bets if b.player == pid]
        entries, _ = await self.store.bet_record(pid, len(bets), None)
        self.check([e.bet_id for e in entries] == [b.bet_id for b in reversed(bets)],
                   f"{pid}: the Bet Record does not start with the round's bets")
        for e in entries:
            self.check((e.outcome, e.odds, e.returned) == want[e.bet_id]
                       and e.net == e.returned - e.deducted if e.returned is not None else False,
                       f"{pid}: Bet Record entry {e}")
            if r.status == "settled":
                spot = BetSpot(e.spot)
                self.check(e.cards == self.last_cards[spot.position.value]
                           and e.banker_cards == self.last_cards["BANKER"],
                           f"{pid}: Bet Record cards {e.cards} {e.banker_cards}")

    async def _audit(self) -> None:
        self._audited_at = self.stats.rounds
        self.stats.audits += 1
        report = await self.store.audit()
        self.check(report.ok, f"audit: {report.problems}")
        self.check(report.total == 0, f"audit total {report.total}")
        self.check((report.house, report.deposits) == (self.model.house, self.model.deposits),
                   f"audit house/deposits {report.house}/{report.deposits}, the model "
                   f"{self.model.house}/{self.model.deposits}")

    # --- the actors ---------------------------------------------------------------------------

    async def _act(self) -> None:
        roll = self.rng.random()
        if roll < self.cfg.crash_rate:
            await self._crash()
            return
        if roll < self.cfg.crash_rate + self.cfg.refused_rate:
            self._refused_command()
            return
        if roll < self.cfg.crash_rate + self.cfg.refused_rate + 0.005:
            await self._deposit()
            return
        phase = self.engine.phase
        if phase == "paused":
            await self._while_paused()
        elif phase == "betting":
            await self._betting()
        elif phase in ("dealing", "revealing"):
            await self._in_play()
        else:
            await self._between_rounds()

    async def _tick(self, due: int) -> None:
        """The runner's timer fires at ``due`` — or late: a busy runner whose one tick then
        catches up on every action that fell due meanwhile, in one step."""
        roll = self.rng.random()
        lag = (0 if roll < self.cfg.tick_on_time
               else self.rng.randint(1, 400) if roll < self.cfg.tick_on_time + 0.1
               else self.rng.randint(400, self.cfg.tick_late_ms))
        self.now = max(self.now, due + lag)
        await self._call(self.engine.tick)

    async def _between_rounds(self) -> None:
        e = self.engine
        auto = e.state.mode == "auto"
        if self.rng.random() < (self.cfg.to_manual if auto else self.cfg.to_auto):
            self.now += self.rng.randint(1, 3_000)
            await self._call(e.set_mode, "manual" if auto else "auto")
            return
        if auto:
            due = e.next_deadline()
            if due is None or self.rng.random() < 0.03:  # the dealer opens at once
                self.now += self.rng.randint(1, 1_000)
                await self._call(e.open_betting, betting_ms=self._betting_ms())
            else:
                await self._tick(due)
            return
        shoe = e.state.shoe
        self.now += self.rng.randint(1, 2_000)
        if shoe is None or e.state.last_round:
            self.shoe = PhysicalShoe(self.rng)
            await self._call(e.start_shoe)
        elif shoe.awaiting_open_card:
            assert self.shoe is not None
            if self.shoe.cut_passed:
                await self._call(e.card, "CUT")
                return
            opening = self.shoe.peek()
            self.shoe.take(1 + parse_cards(opening)[0].burn_count)
            await self._call(e.card, opening)
        else:
            await self._call(e.open_betting, betting_ms=self._betting_ms())

    def _betting_ms(self) -> int | None:
        return None if self.rng.random() < 0.7 else self.rng.randint(1_000, 30_000)

    async def _betting(self) -> None:
        e = self.engine
        assert e.state.closes_at is not None
        closes = e.state.closes_at + e.state.timing.close_grace_ms
        deadline = e.next_deadline()  # auto mode: maybe the next card, face down
        assert deadline is not None
        roll = self.rng.random()
        window = e.state.timing.betting_ms
        per_action = 1 / max(1.0, self.cfg.bets_per_round)
        if roll < self.cfg.pause_in_betting * per_action:
            self.now = self.rng.randint(self.now, max(self.now, closes - 1))
            await self._call(e.pause, self.rng.choice(["", "dealer break", "table check"]))
            return
        roll -= self.cfg.pause_in_betting * per_action
        if roll < self.cfg.cancel_in_betting * per_action:
            await self._call(e.cancel_round, "")
            return
        roll -= self.cfg.cancel_in_betting * per_action
        if roll < 0.01 * per_action:
            self.now = self.rng.randint(self.now, max(self.now, closes - 1))
            await self._call(e.close_betting)
            return
        if (e.state.mode == "manual" and len(e.state.round_cards) < 13
                and self.rng.random() < self.cfg.deal_in_betting):
            # the dealer deals while the players bet: a card takes a moment of the window,
            # not a share of the players' bets
            self.now = min(self.now + self.rng.randint(0, 200), max(self.now, closes - 1))
            self.stats.cards_in_betting += 1
            await self._deal_manual_card()
            return
        at = self.now + int(self.rng.expovariate(self.cfg.bets_per_round / window))
        if at < deadline:
            self.now = at
            await self._player_bets()
            return
        # The deadline: a bet that arrives just after it, then the (maybe late) tick.
        if deadline == closes and self.rng.random() < 0.2:
            self.now = max(self.now, closes + self.rng.randint(0, 200))
            await self._player_bets()
        await self._tick(deadline)

    async def _in_play(self) -> None:
        e = self.engine
        roll = self.rng.random()
        if roll < self.cfg.pause_in_play:
            self.now += self.rng.randint(1, 100)
            await self._call(e.pause, "")
            return
        roll -= self.cfg.pause_in_play
        if roll < self.cfg.cancel_in_play:
            self.now += self.rng.randint(1, 100)
            await self._call(e.cancel_round, "")
            return
        roll -= self.cfg.cancel_in_play
        if roll < 0.02:  # a player still trying after betting closed
            self.now += self.rng.randint(0, 50)
            await self._player_bets()
            return
        if e.state.mode == "auto":
            due = e.next_deadline()
            assert due is not None
            await self._tick(due)
            return
        self.now += self.rng.randint(100, 2_000)
        if e.phase == "revealing":
            await self._call(e.reveal)
            return
        await self._deal_manual_card()

    async def _deal_manual_card(self) -> None:
        """The manual dealer's next card: the cut card when it shows, sometimes an
        impossible card or a misread (voided with a supervisor's approval), else the next
        card of the physical shoe."""
        e = self.engine
        assert self.shoe is not None and e.state.shoe is not None
        if self.shoe.cut_passed and not e.state.shoe.cut_out:
            self.stats.cut_cards += 1
            await self._call(e.card, "CUT")
            return
        if self.rng.random() < self.cfg.impossible_card:
            gone = sorted(c for c, n in e.state.shoe.seen.items() if n >= 8)
            if gone:
                before = e.to_bytes()
                try:
                    e.card(self.rng.choice(gone), self.now)
                except EngineError as error:
                    self.check(error.code == "impossible_card" and error.step is not None,
                               f"an impossible card gave {error.code}")
                    assert error.step is not None
                    self.check(e.phase == "paused", "an impossible card did not pause")
                    self.stats.impossible_cards += 1
                    await self._commit(error.step)
                    return
                raise self.fail(f"a ninth copy was accepted (state {before[:80]!r}…)")
        if self.rng.random() < self.cfg.misread_card:
            misread = self.rng.choice(sorted({str(c) for c in DECK}
                                             - {c for c, n in e.state.shoe.seen.items()
                                                if n >= 7}))
            dealt = len(e.state.round_cards)
            crashes = self.stats.crashes
            await self._call(e.card, misread)
            if self.stats.crashes != crashes or self.engine.phase == "paused":
                return  # lost with the process (or paused): the dealer goes on from there
            self.now += self.rng.randint(1_000, 30_000)
            await self._call(self.engine.void_cards, 1, "Dee", "Sue")
            if self.stats.crashes == crashes:
                self.check(len(self.engine.state.round_cards) == dealt,
                           "a correction voided nothing")
                self.stats.corrections += 1
            return
        card = self.shoe.peek()
        self.shoe.take()
        await self._call(e.card, card)

    async def _while_paused(self) -> None:
        e = self.engine
        roll = self.rng.random()
        if roll < 0.3:  # players keep trying while the table is paused
            self.now += self.rng.randint(0, 2_000)
            await self._player_bets()
            return
        self.now += self.rng.randint(500, 60_000)
        if self.rng.random() < self.cfg.cancel_when_paused:
            await self._call(e.cancel_round, "")
        else:
            await self._call(e.resume)

    def _refused_command(self) -> None:
        """The dealer tries something illegal now: it is refused and changes nothing."""
        e = self.engine
        phase, mode = e.phase, e.state.mode
        now = self.now
        choices: list[tuple[Callable[[], Step], set[str]]] = []
        forbidden = [c for c in typing.get_args(Command) if (phase, c) not in TRANSITIONS]
        other: Mode = "manual" if mode == "auto" else "auto"
        commands: dict[str, Callable[[], Step]] = {
            "start_shoe": lambda: e.start_shoe(now),
            "open_betting": lambda: e.open_betting(now),
            "close_betting": lambda: e.close_betting(now),
            "card": lambda: e.card("9D", now),
            "reveal": lambda: e.reveal(now),
            "pause": lambda: e.pause("x", now),
            "resume": lambda: e.resume(now),
            "cancel_round": lambda: e.cancel_round("x", now),
            "set_mode": lambda: e.set_mode(other, now),
            "void_cards": lambda: e.void_cards(1, "Dee", "Sue", now),
        }
        choices += [(commands[c], {"illegal_command"}) for c in forbidden]
        if phase in allowed_in("card"):
            if mode == "auto":
                choices.append((lambda: e.card("KH", now), {"wrong_mode"}))
            elif e.state.shoe is not None:
                choices.append((lambda: e.card("ZZ", now), {"bad_card"}))
        if phase in allowed_in("open_betting"):
            choices.append((lambda: e.open_betting(now, betting_ms=999), {"bad_command"}))
        command, codes = self.rng.choice(choices)
        before = e.to_bytes()
        try:
            command()
        except EngineError as error:
            self.check(error.code in codes and error.step is None,
                       f"refused with {error.code}, expected {codes}")
        else:
            raise self.fail(f"a command illegal in {phase} ({mode}) was accepted")
        self.check(e.to_bytes() == before, "a refused command changed the state")
        self.stats.refused_commands += 1

    async def _deposit(self) -> None:
        pid = self.rng.choice(self.players)
        amount = self.rng.randint(1, 20_000)
        known = sorted(self.model.deposit_ids)
        tid = (self.rng.choice(known) if known and self.rng.random() < 0.2
               else f"dep{len(self.model.deposit_ids)}")
        balance = await self.store.deposit(tid, pid, amount, self.now)
        if tid not in self.model.deposit_ids:
            self.model.deposit_ids.add(tid)
            self.model.balances[pid] += amount
            self.model.deposits += amount
            self.stats.deposits += 1
        self.check(balance == self.model.balances[pid], f"deposit: {balance}")

    # --- players ------------------------------------------------------------------------------

    async def _player_bets(self) -> None:
        """A player's bet attempt — now and then several players' at the same instant, which
        the store may take in one group commit — each answer checked against the model."""
        rng = self.rng
        if rng.random() < 0.03:
            await self._high_roller()
            return
        count = rng.randint(2, 6) if rng.random() < self.cfg.burst else 1
        requests: dict[str, BetRequest] = {}
        for pid in rng.sample(self.players, count):
            request = self._bet_request(pid)
            requests.setdefault(request.player_id, request)  # one bet per player at once:
        await self._place(list(requests.values()))            # answers independent of order

    async def _high_roller(self) -> None:
        """One player's big bets on several spots, one after another: up to the limits."""
        pid = self.rng.choice(self.players)
        for position in self.rng.sample(PLAYER_POSITIONS, 4):
            self.bet_no += 1
            await self._place([BetRequest(
                player_id=pid, table=self.cfg.table, bet_id=f"b{self.bet_no}",
                round_id=self.current_round or "none", spot=position.value,
                amount=self.rng.randint(2_500, 5_000))])

    async def _place(self, batch: list[BetRequest]) -> None:
        expected: list[p.BetAccepted | str] = []
        for request in batch:
            answer = self.model.answer(request, self.now)
            expected.append(answer)
            if isinstance(answer, p.BetAccepted):
                if (request.player_id, request.bet_id) in self.model.bets:
                    self.stats.retries += 1
                else:
                    self.model.accept(request, answer)
                    self.stats.bets_accepted += 1
            else:
                self.stats.rejections[answer] += 1
        if len(batch) == 1:
            answers = [await place_bet(self.store, batch[0], self.now)]
        else:
            answers = list(await asyncio.gather(
                *(place_bet(self.store, request, self.now) for request in batch)))
        for request, want, got in zip(batch, expected, answers, strict=True):
            if isinstance(want, p.BetAccepted):
                self.check(got == want, f"{request} → {got}, expected {want}")
            else:
                self.check(isinstance(got, p.BetRejected) and got.code == want,
                           f"{request} → {got}, expected {want}")

    def _bet_request(self, pid: str) -> BetRequest:
        """A bet of ``pid``: mostly valid, else refused for one reason or another."""
        rng = self.rng
        roll = rng.random()
        table = self.cfg.table
        round_id = self.current_round or "none"
        mine = self.model.by_player[pid][-5:] if roll < 0.12 else []
        if roll < 0.08 and mine:  # a retry of a bet that was accepted: the same answer
            b = rng.choice(mine)
            return BetRequest(player_id=pid, table=table, bet_id=b.bet_id, round_id=b.round_id,
                              spot=b.spot, amount=b.amount)
        if roll < 0.12 and mine:  # a bet id used before, for another bet
            b = rng.choice(mine)
            return BetRequest(player_id=pid, table=table, bet_id=b.bet_id, round_id=round_id,
                              spot=b.spot, amount=b.amount + 1)
        self.bet_no += 1
        bet_id = f"b{self.bet_no}"
        spot = rng.choice(BET_SPOTS).value
        low, high = ((10, 1_000) if spot.endswith("_PAIR") else (10, 5_000))
        amount = int(min(high, low * (high / low) ** rng.random()))
        if roll < 0.14:
            bet_id = rng.choice(["", "x" * (MAX_BET_ID + 1)])
        elif roll < 0.16:
            spot = rng.choice(["P6", "BANKER", "p1", "TIE"])
        elif roll < 0.18:
            amount = rng.choice([0, -amount, MAX_AMOUNT + 1])
        elif roll < 0.20:
            amount = rng.randint(1, low - 1)
        elif roll < 0.23:
            amount = rng.randint(high + 1, 2 * high)
        elif roll < 0.25:
            round_id = rng.choice(["sim.0.0", self.previous_round or "none"])
        elif roll < 0.26:
            table = "elsewhere"
        elif roll < 0.27:
            pid = "ghost"
        return BetRequest(player_id=pid, table=table, bet_id=bet_id, round_id=round_id,
                          spot=spot, amount=amount)

    # --- the end --------------------------------------------------------------------------------

    async def _finish(self) -> None:
        """Finish the round in flight, then check the whole ledger once more."""
        for _ in range(10_000):
            r = self.model.rounds.get(self.current_round or "")
            if r is None or r.ended:
                break
            phase = self.engine.phase
            if phase == "paused":
                self.now += 1_000
                await self._call(self.engine.resume)
            elif phase == "betting" or self.engine.state.mode == "auto":
                due = self.engine.next_deadline()
                if due is None:
                    await self._call(self.engine.cancel_round, "end of simulation")
                else:
                    await self._tick(due)
            else:
                await self._in_play()
        else:
            raise self.fail("the last round did not end")
        await self._audit()
        for key, bet in self.model.bets.items():
            r = self.model.rounds[bet.round_id]
            self.check(r.ended and bet.settled == 1,
                       f"{key} in {r.round_id} ({r.status}) settled {bet.settled} times")
        self.check(sum(self.model.balances.values()) + self.model.house
                   + sum(b.deducted for r in self.model.rounds.values() if not r.ended
                         for b in r.bets) == self.model.deposits, "the model leaks")
        # The Bet Record of a few players, paged through: every bet, once, ended.
        for pid in self.rng.sample(self.players, min(5, len(self.players))):
            seen: list[str] = []
            cursor: str | None = None
            while True:
                entries, cursor = await self.store.bet_record(pid, 200, cursor)
                seen += [e.bet_id for e in entries]
                self.check(all(e.state in ("settled", "refunded") for e in entries),
                           f"{pid} has an open bet in the record")
                if cursor is None:
                    break
            mine = [b.bet_id for b in self.model.by_player[pid]]
            self.check(seen == mine[::-1], f"{pid}'s Bet Record: {len(seen)} of {len(mine)}")
