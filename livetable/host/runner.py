"""The runner: the asyncio shell around one table's engine.

It is the table's one writer. It wakes at the engine's next deadline (or when a dealer
command arrives), feeds the engine, and for every step: stores it (effects, events, the
engine's state — one transaction), *then* publishes it on the bus. A crash between the two
loses nothing: the step is in the store's event log, where a resuming client finds it.

On start it rebuilds the engine from the store and lets the engine's recovery rule decide
the fate of an unfinished round (resume it if all its cards are recorded, else cancel and
refund). A store older than what the table announced (restored from a backup: the marker
kept outside it, host/restores.py) never deals from that shoe again: it is retired.

Settlement never holds the table: the step that settles or cancels a round settles its
first chunk of bets (all of them, in a round of up to ``settle_chunk`` bets); a settlement
task then asks the store for the rest, one chunk per call (:meth:`Store.settle_pending`),
and publishes each chunk's ``bet_settled`` as it is stored, while the table steps on. The
same task runs on start, so a round whose settlement a crash or a failover interrupted is
finished by whichever runner holds the table next.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
from collections.abc import Callable

from livetable import protocol as p
from livetable.bus import Bus, TableBatch
from livetable.clock import now_ms
from livetable.engine import EngineError, Step, TableEngine, Timing
from livetable.engine.dealing import DealerAction, command_name, dispatch
from livetable.engine.effects import CancelRound, SetBetting, SettleRound
from livetable.engine.state import Mode
from livetable.host.announcements import Announcements, WinnerTerms, masked_everywhere
from livetable.host.restores import Announced, reopened, restored
from livetable.host.results import ResultsOutbox, publish_again
from livetable.rules.cards import CardError
from livetable.store.base import OutOfStep, Settled, Store, StoreUnavailable
from livetable.tasks import cancel, check_cancelled, wait_set

log = logging.getLogger("livetable.runner")


#: Settlement chunk calls in flight at once (see :meth:`TableRunner._settle_pending`).
SETTLE_AHEAD = 2
#: How often a runner whose lease is in doubt looks again whether it may step (seconds).
IN_DOUBT_RECHECK = 0.1
#: A step shown this late (ms after it was taken: a stalled Redis) delays the next as much.
SHOWN_LATE_MS = 250


class TableRunner:
    def __init__(
            self, table: str, store: Store, bus: Bus, *, name: str | None = None,
            mode: Mode = "auto", limits: p.Limits | None = None, timing: Timing | None = None,
            stream: p.StreamView | None = None, rng: random.Random | None = None,
            clock: Callable[[], int] = now_ms,
            on_settled: Callable[[int, float], None] | None = None,
            on_refused: Callable[[str], None] | None = None,
            fatal: tuple[type[BaseException], ...] = (), announced: Announced | None = None,
            winner_terms: WinnerTerms = masked_everywhere) -> None:
        self.table = table
        #: The last step announced of each table, kept outside the store (restores.py).
        self.announced = announced
        self.store = store
        self.bus = bus
        self.clock = clock
        self._defaults = (name, mode, limits, timing)
        self._stream = stream
        self._rng = rng
        self.engine: TableEngine | None = None
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: The engine is ahead of the store (a commit failed): reload before the next step.
        self._stale = False
        self.on_settled = on_settled
        #: Errors after which this runner must stop driving the table (fenced out).
        self.fatal = fatal
        self.alive = False
        #: Why the table is held still (a failed ledger audit, a store that changed): it
        #: takes no tick and no dealer command but pause and cancel until released.
        self.halted: str | None = None
        self._settling: asyncio.Task[None] | None = None
        self._more_to_settle = False
        #: Called with the table when the store refuses a step as out of step.
        self.on_refused = on_refused
        #: Steps the store refused as out of step, and the last one: (when, why).
        self.refusals = 0
        self.refused: tuple[int, str] | None = None
        self._refusal_pending = False  # refused: the next reload is for a refusal
        self._reloaded_for_refusal = False  # reloaded for one, no step stored since
        #: (epoch, seq, snapshot) of the last step published: private batches carry it.
        self._published: tuple[int, int, bytes] = (0, 0, b"")
        #: Whether it may step now: with a lease (host/scaleout.py), while the lease surely
        #: lasts (cut off from Redis, an engine opened a round past its lease).
        self.holds: Callable[[], bool] = lambda: True
        #: Marks of rounds whose results all reached the bus (results.py); ``_unsure``:
        #: this runner cannot vouch for every result stored (a takeover, a failure).
        self._outbox = store if isinstance(store, ResultsOutbox) else None
        self._unsure = self._outbox is not None
        self._shown_late = 0  # ms the last step reached the bus late (SHOWN_LATE_MS)
        #: bet_stats at the close, round_winners once settled (host/announcements.py).
        self.announcements = Announcements(store, winner_terms)
        self._winners_due: str | None = None

    async def start(self) -> None:
        saved = await self.store.load_table(self.table)
        now = self.clock()
        restored = None
        if saved is None:
            name, mode, limits, timing = self._defaults
            self.engine = TableEngine.new(self.table, name, mode=mode, limits=limits,
                                          timing=timing, rng=self._rng, epoch=now)
            self.engine.state.stream = self._stream
        else:
            self.engine = reopened(self.table, saved, self._rng, self._defaults[1:], self._stream)
            restored = self._restored(now)
        engine = self.engine
        self._published = (engine.state.epoch, engine.state.seq, p.encode(engine.snapshot()))
        async with self._lock:
            await self._commit(self._recovered(now, restored), force=True)
        self.alive = True
        self._task = asyncio.create_task(self._run(), name=f"table-{self.table}")
        self._settle_later()  # what a crash or a failover left half settled

    def _restored(self, now: int) -> str | None:
        """If the store holds the table at an older step than it announced: what happened
        (see :func:`livetable.host.restores.restored`), else None."""
        assert self.engine is not None
        if self.announced is None:
            return None
        return restored(self.table, self.engine.state, self.announced, now)

    def _recovered(self, now: int, restored: str | None) -> Step:
        """What a start (or a reload) does: finish or cancel the round in play; and if the
        store was ``restored``, retire the shoe (now, or after a round being revealed)."""
        assert self.engine is not None
        step = self.engine.recover(now)
        if restored is not None:
            self.engine.shoes.retire(step, "restored")
        return step

    async def _reload(self) -> None:
        """Rebuild the engine from the store's copy, after a step whose commit failed.

        The engine took that step in memory, but the store may not have it (or may: a reply
        lost with the connection). Stepping on from memory would commit the next state
        without the lost step's events and effects — a hole in the event log, a close of
        betting or a settlement never applied to the ledger. The stored state is the truth:
        from it the engine takes the step again (or already has, if it was stored).
        """
        saved = await self.store.load_table(self.table)
        if saved is None:
            raise RuntimeError(f"table {self.table}: no stored state to reload")
        self.engine = reopened(self.table, saved, self._rng, self._defaults[1:], self._stream)
        self._stale = False
        self._reloaded_for_refusal, self._refusal_pending = self._refusal_pending, False
        log.warning("table %s: engine reloaded from the store after a failed commit",
                    self.table)
        now = self.clock()
        restored = self._restored(now)  # the store lost steps already announced
        if restored is not None:
            await self._commit(self._recovered(now, restored), force=True)

    async def stop(self) -> None:
        self.alive = False
        for task in (self._task, self._settling):
            await cancel(task)
        await self.announcements.stop()
        self._task = self._settling = None

    @property
    def settling(self) -> bool:
        """Whether settlement chunks are being stored and published now."""
        return self._settling is not None and not self._settling.done()

    def _settle_later(self) -> None:
        """Make sure the settlement task runs (once), and goes round once more."""
        self._more_to_settle = True
        if self._settling is None or self._settling.done():
            self._settling = asyncio.create_task(self._settle_pending(),
                                                 name=f"settle-{self.table}")

    async def _settle_pending(self) -> None:
        """Settle what the store still holds open, chunk by chunk, publishing each chunk.

        :data:`SETTLE_AHEAD` chunk calls are in flight while a chunk is published (the
        store's writer or PostgreSQL stores the next ones while the event loop frames and writes
        this one's results, and never waits for the loop to ask): each chunk is still
        stored before it is published. A call made when nothing was left answers nothing
        — or the first chunk of a round that started settling meanwhile, published like
        any other."""
        while self._more_to_settle and self.alive:
            self._more_to_settle = False
            if not await self._publish_again():
                return
            more = True
            ahead: collections.deque[asyncio.Future[tuple[list[Settled], bool]]] = \
                collections.deque()
            try:
                while self.alive:
                    while more and len(ahead) < SETTLE_AHEAD:
                        ahead.append(asyncio.ensure_future(
                            self.store.settle_pending(self.table, self.clock())))
                    if not ahead:
                        break
                    started = self.clock()
                    try:
                        settled, more = await ahead.popleft()
                        if settled:
                            await self._publish_private(settled, started)
                    except Exception as exc:
                        # not lost: tried again; and if stored, not published: again
                        more = self._unsure = self._more_to_settle = True
                        if not await self._survive("a settlement chunk", exc):
                            return
                        continue
                if not more and self._winners_due and not self._more_to_settle:
                    round_id, self._winners_due = self._winners_due, None
                    await self._announce("round_winners", round_id)
            finally:  # stopped meanwhile: what the calls stored, a resume brings
                for call in ahead:
                    if not call.done():
                        await cancel(call)
                    elif not call.cancelled():
                        call.exception()  # seen: a failure here is retried by the resume
            await self._mark_published()

    async def _publish_again(self) -> bool:
        """Unless it can vouch for every result stored, publish unmarked rounds' again."""
        while self._unsure and self._outbox is not None and self.alive:
            try:
                async with self._lock:
                    self._unsure = False
                    await publish_again(self.store, self._outbox, self.bus, self.table,
                                        self._published)
            except Exception as exc:
                self._unsure = True
                if not await self._survive("publishing results again", exc):
                    return False
        return self.alive

    async def _mark_published(self) -> None:
        """Every chunk stored since this runner could last vouch was published: say so."""
        try:
            async with self._lock:  # no step is between its commit and its publication
                if self._outbox is not None and not self._unsure and self.alive:
                    await self._outbox.mark_published(self.table)
        except Exception as exc:
            log.warning("table %s: rounds not marked published (%s)", self.table, exc)

    async def _publish_private(self, settled: list[Settled], started: int) -> None:
        async with self._lock:  # after the step that settled them is published
            # The head and snapshot of the last step published, not the engine's: after a
            # commit that failed (or was fenced off) the engine is ahead of what the
            # gateways have, and a batch ahead of their head is a gap to them (4011).
            epoch, seq, snapshot = self._published
            await self.bus.publish(TableBatch(
                table=self.table, epoch=epoch, seq=seq, frames=[], snapshot=snapshot,
                private=[(s.player_id, p.encode(s.message)) for s in settled]))
        if self.on_settled is not None:
            self.on_settled(len(settled), (self.clock() - started) / 1000)

    async def halt(self, reason: str, *, pause: bool) -> None:
        """Hold the table still. With ``pause``, a round in play is paused first (its bets
        refused from now on) — not when the store is not ours any more (nothing is written
        to a store that changed under us)."""
        first = self.halted is None
        self.halted = reason
        if not (first and pause and self.engine is not None):
            return
        async with self._lock:
            try:
                step = self.engine.pause(reason, self.clock())
            except EngineError:
                return  # no round in play: holding still is enough
            await self._commit(step, force=True)

    def release(self) -> None:
        """Let the table move again (a paused round stays paused until a dealer resumes)."""
        self.halted = None
        self._wake.set()

    async def _run(self) -> None:
        assert self.engine is not None
        while True:
            check_cancelled()  # redis-py may have swallowed it (livetable/tasks.py)
            if self.halted is not None:
                await self._wake.wait()
                self._wake.clear()
                continue
            deadline = self.engine.next_deadline()
            if deadline is not None:
                delay = (deadline + self._shown_late - self.clock()) / 1000
                if delay > 0:  # not wait_for: it can lose a stop (livetable/tasks.py)
                    await wait_set(self._wake, delay)
            else:
                await self._wake.wait()
            self._wake.clear()
            due = self.engine.next_deadline()  # woken early after a step shown late: wait on
            if self._shown_late and due is not None and self.clock() < due + self._shown_late:
                continue
            if not (self.alive and self.holds()):  # the lease in doubt, or lost: no step
                await wait_set(self._wake, IN_DOUBT_RECHECK)
                continue
            try:
                async with self._lock:
                    if self._stale:
                        await self._reload()
                    await self._commit(self.engine.tick(self.clock()))
            except Exception as exc:
                if not await self._survive("a tick", exc) and not self.alive:
                    return  # fenced out; a bug holds the table (the loop waits above)

    async def _survive(self, what: str, exc: Exception) -> bool:
        """After ``what`` failed with ``exc``: whether to try it again (after a pause).

        A store outage must not kill the table: it is retried. A step the store refused as
        out of step (:class:`~livetable.store.base.OutOfStep`) is retried from the store's
        state, reloaded. Being fenced out (``fatal``)
        stops this runner: another engine drives the table now. Anything else is a bug,
        not an outage — retried, it would fail the same way for ever, step after step: it
        is logged with its traceback and the table is held still (:meth:`halt`; the tick
        loop waits for :meth:`release`) with the bug as the reason.
        """
        if isinstance(exc, self.fatal):
            log.warning("table %s: %s; this runner stops", self.table, exc)
            self.alive = False
            return False
        if isinstance(exc, StoreUnavailable):
            log.warning("table %s: %s failed, the store is unavailable (%s); retrying",
                        self.table, what, exc)
            await asyncio.sleep(0.5)
            return True
        if isinstance(exc, OutOfStep):
            if self._refused(what, exc):
                await asyncio.sleep(0.1)
                return True
            exc = RuntimeError(f"the store refused the step again after the engine was "
                               f"reloaded from it: {exc}")
        log.error("table %s: %s failed: a bug, not an outage; the table is held",
                  self.table, what, exc_info=exc)
        await self.halt(f"{what} failed: {type(exc).__name__}: {exc}", pause=False)
        return False

    def _refused(self, what: str, exc: OutOfStep) -> bool:
        """The store refused ``what``'s step as out of step: the store is not where the
        engine left it (a failover lost what it wrote, or another engine wrote), and
        nothing of the step was written. The engine drops its state (``_stale``) and steps
        on from the store's; the refusal is counted and shown (:attr:`refused`).

        Whether to go on: not if the engine was reloaded for a refusal and the store
        refused its very next step too — the engine, rebuilt from the store, disagrees with
        it (its state with its rounds): a bug, which holds the table."""
        again = self._reloaded_for_refusal
        self.refusals += 1
        self.refused = (self.clock(), f"{what} refused by the store: {exc}")
        if self.on_refused is not None:
            self.on_refused(self.table)
        log.warning("table %s: %s was refused by the store (%s); reloading the engine",
                    self.table, what, exc)
        self._stale = self._refusal_pending = True
        return not again

    async def _commit(self, step: Step, force: bool = False) -> None:
        """Store the step with the engine's new state, then publish it (if it shows)."""
        engine = self.engine
        assert engine is not None
        frames = [(ev.epoch, ev.seq, p.encode(ev)) for ev in step.events]
        started = self.clock()
        settles = any(isinstance(e, SettleRound | CancelRound) for e in step.effects)
        if settles:
            # The round's bets past its first chunk are asked for now, not once this step
            # is published: a store that takes calls in order (the SQLite writer) settles
            # them right after storing the step, while the event loop fans the step out
            # (round_settled to 5,000 connections: about 80 ms it would have sat idle).
            self._settle_later()
        snapshot = p.encode(engine.snapshot())
        try:
            settled = await self.store.commit_step(self.table, engine.to_bytes(), frames,
                                                   step.effects, started, snapshot=snapshot)
        except BaseException:
            self._stale = True  # see _reload
            if settles and self._outbox is not None:  # its first chunk stored, unpublished?
                self._unsure = True
                self._settle_later()
            raise
        self._reloaded_for_refusal = False
        if frames and self.announced is not None:  # stored: now it may be announced
            self.announced.record(self.table, engine.state.epoch, engine.state.seq,
                                  engine.state.shoe_no)
        if not (frames or settled or force):
            return
        batch = TableBatch(
            table=self.table,
            epoch=engine.state.epoch,
            seq=engine.state.seq,
            frames=[(seq, frame) for _, seq, frame in frames],
            snapshot=snapshot,
            private=[(s.player_id, p.encode(s.message)) for s in settled],
        )
        await self.bus.publish(batch)  # lost, it comes by gap repair, its results read
        late = self.clock() - started
        self._shown_late = late if frames and late >= SHOWN_LATE_MS else 0
        self._published = (batch.epoch, batch.seq, batch.snapshot)
        if settled and self.on_settled is not None:
            self.on_settled(len(settled), (self.clock() - started) / 1000)
        for effect in step.effects:
            if isinstance(effect, SetBetting) and effect.status == "closed":
                self.announcements.later(f"bet-stats-{self.table}",
                                         self._announce("bet_stats", effect.round_id))
            elif isinstance(effect, SettleRound):
                self._winners_due = effect.round_id
        if settles:
            # and once more now that it is stored: calls that reached the store before
            # the step (another connection to PostgreSQL, or the step waiting for the slips
            # handed over before it) found nothing to settle
            self._settle_later()

    async def _announce(self, what: str, round_id: str) -> None:
        """Store and publish the engine's ``what`` about ``round_id``: news, not money —
        dropped (and logged) if the round moved on or the store cannot answer."""
        async with self._lock:
            if self.engine is None or self._stale or self.halted is not None:
                return
            read = (self.announcements.bet_stats if what == "bet_stats"
                    else self.announcements.round_winners)
            try:
                await self._commit(await read(self.engine, round_id))
            except EngineError as exc:
                log.info("table %s: %s of %s not announced: %s", self.table, what,
                         round_id, exc.message)
            except Exception as exc:  # fenced out, too: the next tick finds it so
                log.warning("table %s: %s of %s not announced: %s", self.table, what,
                            round_id, exc, exc_info=not isinstance(exc, StoreUnavailable))

    async def execute(self, command: DealerAction) -> p.Ack | p.Error:
        """A dealer command: run it on the engine, store and publish the step."""
        assert self.engine is not None
        name = command_name(command)
        if not self.holds():
            return p.Error(code="table_unavailable", message="its lease is in doubt; try again")
        if self.halted is not None and not isinstance(command, p.Pause | p.CallOffRound
                                                      | p.RoundCards):
            return p.Error(code="table_halted", message=f"the table is held: {self.halted}")
        async with self._lock:
            if self._stale:
                await self._reload()
            engine = self.engine
            now = self.clock()
            if isinstance(command, p.RoundCards):  # a read: nothing to store or announce
                try:
                    cards = engine.entered_cards()
                except EngineError as exc:
                    return p.Error(code=exc.code, message=exc.message)
                return p.Ack(cmd=name, detail={"round_id": engine.state.round_id,
                                               "phase": engine.phase, "cards": cards})
            try:
                step = dispatch(engine, command, now)
            except EngineError as exc:
                if exc.step is not None:
                    await self._commit(exc.step, force=True)
                return p.Error(code=exc.code, message=exc.message)
            except CardError as exc:
                return p.Error(code="bad_card", message=str(exc))
            try:
                await self._commit(step, force=True)
            except self.fatal as exc:
                self.alive = False
                return p.Error(code="table_unavailable", message=str(exc))
            except OutOfStep as exc:  # reloaded before the next command (see _survive)
                if not self._refused(name, exc):
                    await self.halt(f"{name} refused by the store again after a reload: "
                                    f"{exc}", pause=False)
                return p.Error(code="table_unavailable",
                               message="the table was behind its store; send it again")
            if isinstance(command, p.VoidCards):  # the audit trail: who voided, who approved
                log.warning("table %s round %s: %d card(s) voided by dealer %s (%s), approved "
                            "by supervisor %s (%s)", self.table, engine.state.round_id,
                            command.count, command.dealer, command.dealer_id,
                            command.supervisor, command.supervisor_id)
        self._wake.set()
        return p.Ack(cmd=name, detail=step.detail)

