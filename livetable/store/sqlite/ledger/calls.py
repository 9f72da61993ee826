"""Every operation of the ledger as a typed call: a msgspec Struct per operation, each
declaring the type of its answer (``Call[Answer]``), and one place that runs them.

Why. The store runs its ledger on a writer thread, or in a writer process
(store/sqlite/writer.py); both must hand it exactly the operations it has, with the arguments
they take, and give the caller the answer of the type it expects. A call is a value:
built and type-checked where the store makes it, encoded (msgpack) to cross to the
process and decoded there by :data:`LedgerCall`, a tagged union, then run by
:func:`perform`, a ``match`` that mypy checks exhaustive (``assert_never``). Renaming or
retyping an operation fails the type check, not a call at run time; the answer crosses
back decoded by the call's own answer type (:func:`answer_type`).
"""

from __future__ import annotations

import functools
import typing
from typing import Any, ClassVar, Generic, TypeVar, assert_never, cast

import msgspec

from livetable import protocol as p
from livetable.betting.sessions import SessionRecord
from livetable.betting.slips import SlipAnswer, SlipRequest
from livetable.betting.tips import TipAnswer, TipRequest
from livetable.engine.effects import Effect
from livetable.rules.fairness import ShoeRecord
from livetable.store.base import AuditReport, Settled
from livetable.store.bets import BetSpread, RoundView, Withdrawal
from livetable.store.sqlite.ledger import accounts, reads, sessions, slips, steps, tips, wallet
from livetable.store.sqlite.ledger.core import Ledger

A = TypeVar("A")


class Call(msgspec.Struct, Generic[A], frozen=True, tag_field="call"):
    """An operation of the ledger whose answer is an ``A``."""

    #: Whether it writes (then a failure to write is an outage of the whole ledger, and a
    #: success that changed the ledger ends one: see ``SQLiteStore.outage``).
    writes: ClassVar[bool] = False


class EnsurePlayer(Call[p.PlayerView], frozen=True, tag="ensure_player"):
    writes = True
    player_id: str
    name: str
    initial_balance: int
    now: int


class ReadPlayer(Call[p.PlayerView | None], frozen=True, tag="player"):
    player_id: str


class Deposit(Call[int], frozen=True, tag="deposit"):
    writes = True
    transfer_id: str
    player_id: str
    amount: int
    now: int


class Withdraw(Call[int | None], frozen=True, tag="withdraw"):
    writes = True
    transfer_id: str
    player_id: str
    amount: int
    now: int
    against: str | None


class WithdrawMany(Call[list[str | None]], frozen=True, tag="withdraw_many"):
    writes = True
    moves: list[Withdrawal]
    now: int


class TakeSlips(Call[list[SlipAnswer]], frozen=True, tag="take_slips"):
    writes = True
    batch: list[tuple[SlipRequest, int]]


class PlaceTip(Call[TipAnswer], frozen=True, tag="place_tip"):
    writes = True
    tip: TipRequest
    now: int


class TipRecord(Call[list[p.TipRecordEntry]], frozen=True, tag="tip_record"):
    player_id: str
    before: str | None
    since: int | None


class CommitStep(Call[list[Settled]], frozen=True, tag="commit_step"):
    writes = True
    table: str
    state: bytes
    events: list[tuple[int, int, bytes]]
    effects: list[Effect]
    now: int
    chunk: int
    #: The table's head after the last step the store wrote for it (see out_of_step).
    left: tuple[int, int] | None = None


class SettlePending(Call[tuple[list[Settled], bool]], frozen=True, tag="settle_pending"):
    writes = True
    table: str
    now: int
    chunk: int


class LoadTable(Call[bytes | None], frozen=True, tag="load_table"):
    table: str


class EventsAfter(Call[list[bytes] | None], frozen=True, tag="events_after"):
    table: str
    epoch: int
    seq: int
    limit: int


class SettlementsForRounds(Call[list[p.BetSettled]], frozen=True,
                           tag="settlements_for_rounds"):
    player_id: str
    round_ids: list[str]


class RoundSettlements(Call[list[tuple[str, p.BetSettled]]], frozen=True,
                       tag="round_settlements"):
    round_id: str


class BetRecord(Call[tuple[list[p.BetRecordEntry], str | None]], frozen=True,
                tag="bet_record"):
    player_id: str
    limit: int
    before: str | None


class ReadBetSpread(Call[BetSpread], frozen=True, tag="bet_spread"):
    round_id: str


class ReadRound(Call[RoundView | None], frozen=True, tag="round_view"):
    round_id: str


class ReadShoe(Call[ShoeRecord | None], frozen=True, tag="shoe_view"):
    shoe_id: str


class Audit(Call[AuditReport], frozen=True, tag="audit"):
    pass


class Identity(Call[str | None], frozen=True, tag="identity"):
    create: bool


class OpenSession(Call[None], frozen=True, tag="open_session"):
    writes = True
    record: SessionRecord


class ReadSession(Call[SessionRecord | None], frozen=True, tag="session"):
    session_id: str


class EndSession(Call[SessionRecord | None], frozen=True, tag="end_session"):
    writes = True
    session_id: str
    reason: str
    now: int


class CountSession(Call[SessionRecord | None], frozen=True, tag="count_session"):
    writes = True
    session_id: str
    round_id: str | None
    staked: int
    returned: int


class RealityChecked(Call[SessionRecord | None], frozen=True, tag="reality_checked"):
    writes = True
    session_id: str
    now: int


class FirstLaunch(Call[bool], frozen=True, tag="first_launch"):
    writes = True
    operator_id: str
    request_id: str
    now: int
    until: int


class WalletLogBatch(Call[list[wallet.Outcome]], frozen=True, tag="wallet_log"):
    """A batch of the seamless wallet log's steps, on the log's own file beside the
    ledger's, in the writer's process (store/sqlite/ledger/wallet.py says why)."""

    writes = True
    path: str
    synchronous: str
    steps: list[wallet.AnyStep]


class CloseLedger(Call[None], frozen=True, tag="close"):
    pass


#: The calls about an operator's session.
SessionCall = (OpenSession | ReadSession | EndSession | CountSession | RealityChecked
               | FirstLaunch)
#: Every call, as the writer process decodes them.
LedgerCall = (EnsurePlayer | ReadPlayer | Deposit | Withdraw | WithdrawMany | TakeSlips
              | PlaceTip | TipRecord
              | CommitStep | SettlePending | LoadTable | EventsAfter | SettlementsForRounds
              | RoundSettlements | BetRecord | ReadBetSpread
              | ReadRound | ReadShoe | Audit | Identity | OpenSession | ReadSession
              | EndSession | CountSession | RealityChecked | FirstLaunch | WalletLogBatch
              | CloseLedger)


def perform(ledger: Ledger, call: LedgerCall) -> object:
    """Run ``call`` on ``ledger``; its answer (of the call's answer type)."""
    match call:
        case EnsurePlayer(player_id, name, initial_balance, now):
            return accounts.ensure_player(ledger, player_id, name, initial_balance, now)
        case ReadPlayer(player_id):
            return accounts.player(ledger, player_id)
        case Deposit(transfer_id, player_id, amount, now):
            return accounts.deposit(ledger, transfer_id, player_id, amount, now)
        case Withdraw(transfer_id, player_id, amount, now, against):
            return accounts.withdraw(ledger, transfer_id, player_id, amount, now, against)
        case WithdrawMany(moves, now):
            return accounts.withdraw_many(ledger, moves, now)
        case TakeSlips(batch):
            return slips.take_slips(ledger, batch)
        case PlaceTip() | TipRecord():
            return _perform_tip(ledger, call)
        case CommitStep(table, state, events, effects, now, chunk, left):
            return steps.commit_step(ledger, table, state, events, effects, now, chunk, left)
        case SettlePending(table, now, chunk):
            return steps.settle_pending(ledger, table, now, chunk)
        case LoadTable(table):
            return steps.load_table(ledger, table)
        case EventsAfter(table, epoch, seq, limit):
            return steps.events_after(ledger, table, epoch, seq, limit)
        case SettlementsForRounds(player_id, round_ids):
            return reads.settlements_for_rounds(ledger, player_id, round_ids)
        case RoundSettlements(round_id):
            return reads.round_settlements(ledger, round_id)
        case BetRecord(player_id, limit, before):
            return reads.bet_record(ledger, player_id, limit, before)
        case ReadBetSpread() | ReadRound() | ReadShoe():
            return _perform_read(ledger, call)
        case Audit():
            return reads.audit(ledger)
        case Identity(create):
            return reads.identity(ledger, create)
        case (OpenSession() | ReadSession() | EndSession() | CountSession() | RealityChecked()
              | FirstLaunch()):
            return _perform_session(ledger, call)
        case WalletLogBatch(path, synchronous, batch):
            return wallet.apply_at(path, synchronous, batch)
        case CloseLedger():
            ledger.close()
            return None
        case _:
            assert_never(call)


def _perform_tip(ledger: Ledger, call: PlaceTip | TipRecord) -> object:
    """The calls about tips to the dealer (store/sqlite/ledger/tips.py)."""
    match call:
        case PlaceTip(tip, now):
            return tips.place_tip(ledger, tip, now)
        case TipRecord(player_id, before, since):
            return tips.tip_record(ledger, player_id, before, since)
        case _:
            assert_never(call)


def _perform_read(ledger: Ledger, call: ReadBetSpread | ReadRound | ReadShoe) -> object:
    """What the public API reads of a round or a shoe (store/sqlite/ledger/reads.py)."""
    match call:
        case ReadBetSpread(round_id):
            return reads.bet_spread(ledger, round_id)
        case ReadRound(round_id):
            return reads.round_view(ledger, round_id)
        case ReadShoe(shoe_id):
            return reads.shoe_view(ledger, shoe_id)
        case _:
            assert_never(call)


def _perform_session(ledger: Ledger, call: SessionCall) -> object:
    """The calls about an operator's session (responsible gaming:
    store/sqlite/ledger/sessions.py)."""
    match call:
        case OpenSession(record):
            sessions.open_session(ledger, record)
            return None
        case ReadSession(session_id):
            return sessions.session(ledger, session_id)
        case EndSession(session_id, reason, now):
            return sessions.end_session(ledger, session_id, reason, now)
        case CountSession(session_id, round_id, staked, returned):
            return sessions.count(ledger, session_id, round_id, staked, returned)
        case RealityChecked(session_id, now):
            return sessions.reality_checked(ledger, session_id, now)
        case FirstLaunch(operator_id, request_id, now, until):
            return sessions.first_launch(ledger, operator_id, request_id, now, until)
        case _:
            assert_never(call)


def run(ledger: Ledger, call: Call[A]) -> A:
    """:func:`perform` with the answer typed by the call."""
    return cast(A, perform(ledger, cast(LedgerCall, call)))


def run_counting(ledger: Ledger, call: Call[A]) -> tuple[A, bool]:
    """:func:`run`, and whether the call changed the ledger (wrote rows: it needed room on
    the disk). A write that changed nothing — a settlement with no round pending, a batch
    of slips all refused — proves nothing of a full disk (``SQLiteStore.outage``)."""
    if not call.writes or isinstance(call, CloseLedger):
        return run(ledger, call), False
    before = ledger.db.total_changes
    answer = run(ledger, call)
    return answer, ledger.db.total_changes != before


@functools.cache
def answer_type(kind: type[Call[Any]]) -> Any:
    """The type of the answer to a call of ``kind`` (the ``A`` of its ``Call[A]``)."""
    for base in getattr(kind, "__orig_bases__", ()):
        if typing.get_origin(base) is Call:
            return typing.get_args(base)[0]
    raise TypeError(f"{kind.__name__} does not say its answer's type")
