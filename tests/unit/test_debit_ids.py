"""A debit's tx_id: unique for ever (docs/operator.md), in uuid4's shape, made without a
system call a debit — and never the same in a forked child as in its parent."""

from __future__ import annotations

import multiprocessing
import os
import random
import re

import pytest

from livetable.operator.log import debit_tx_id

SHAPE = re.compile(r"d-[0-9a-f]{32}")


def test_ids_have_the_shape_operators_were_shown_and_never_repeat() -> None:
    ids = [debit_tx_id() for _ in range(100_000)]
    assert all(SHAPE.fullmatch(tx_id) for tx_id in ids), ids[:3]
    assert len(set(ids)) == len(ids)


def test_ids_differ_from_their_first_digits() -> None:
    """Ids that share a long prefix make every comparison in PostgreSQL's index on
    ``tx_id`` walk it: consecutive ids differ within their first hex digits."""
    ids = [debit_tx_id() for _ in range(1_000)]
    assert len({tx_id[:8] for tx_id in ids}) > 990


def test_seeding_the_module_random_does_not_repeat_ids() -> None:
    random.seed(7)
    first = debit_tx_id()
    random.seed(7)
    assert debit_tx_id() != first


def _child(queue: multiprocessing.Queue[list[str]]) -> None:
    queue.put([debit_tx_id() for _ in range(3)])


@pytest.mark.process
def test_a_forked_child_never_makes_its_parents_ids() -> None:
    """A server that forks (a worker, a supervisor's child) must not send the operator a
    tx_id its parent sent, or will send: the operator would answer the parent's debit."""
    debit_tx_id()  # the parent has drawn before the fork
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[list[str]] = context.Queue()
    child = context.Process(target=_child, args=(queue,))
    child.start()
    theirs = queue.get(timeout=30)
    child.join(timeout=30)
    ours = [debit_tx_id() for _ in range(3)]
    assert not set(theirs) & set(ours), (os.getpid(), theirs, ours)
