"""A debit's tx_id: unique for ever (docs/operator.md), in uuid4's shape, made without a
system call a debit — and never the same in a forked child as in its parent."""

from __future__ import annotations

import multiprocessing
import re

import pytest

from livetable.operator.log import _DebitIds, debit_tx_id

SHAPE = re.compile(r"d-[0-9a-f]{32}")


def test_ids_have_the_shape_operators_were_shown_and_never_repeat() -> None:
    ids = [debit_tx_id() for _ in range(100_000)]
    assert all(SHAPE.fullmatch(tx_id) for tx_id in ids), ids[:3]
    assert len(set(ids)) == len(ids)


def test_two_processes_draw_their_own_random_part() -> None:
    first, second = _DebitIds(), _DebitIds()
    assert first()[:26] != second()[:26]


def test_the_counter_running_out_draws_a_new_random_part() -> None:
    ids = _DebitIds()
    before = ids()
    ids.counter = iter([(1 << 32) - 1, 1 << 32])  # type: ignore[assignment]
    last = ids()
    assert last[:26] == before[:26] and last.endswith("ffffffff")
    wrapped = ids()
    assert SHAPE.fullmatch(wrapped) and wrapped[:26] != before[:26]
    assert wrapped.endswith("00000000")


def _child(queue: multiprocessing.Queue[list[str]]) -> None:
    queue.put([debit_tx_id() for _ in range(3)])


@pytest.mark.process
def test_a_forked_child_never_makes_its_parents_ids() -> None:
    """A server that forks (a worker, a supervisor's child) must not send the operator a
    tx_id its parent sent, or will send: the operator would answer the parent's debit."""
    debit_tx_id()  # the parent has drawn and counted before the fork
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[list[str]] = context.Queue()
    child = context.Process(target=_child, args=(queue,))
    child.start()
    theirs = queue.get(timeout=30)
    child.join(timeout=30)
    ours = [debit_tx_id() for _ in range(3)]
    assert not set(theirs) & set(ours)
    assert {tx_id[:26] for tx_id in theirs}.isdisjoint({tx_id[:26] for tx_id in ours})
