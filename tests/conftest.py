"""Shared test configuration.

This file's presence puts ``tests/`` on ``sys.path`` (pytest's rootdir-relative "prepend"
import mode), so that helpers kept beside the tests import by name: ``sim`` (the simulation
harness, ``tests/sim/``), and the hooks below, which share the tests out over pytest-xdist's
workers (:mod:`parallel`) and sort them into tiers (:mod:`tiers`; mypy checks them there,
where this file's name does not clash).
"""

from parallel import pytest_collection_modifyitems, pytest_xdist_make_scheduler

#: The tiers' markers and their check (:mod:`tiers`: what ``bin/test --fast`` runs).
pytest_plugins = ["tiers"]

__all__ = ["pytest_collection_modifyitems", "pytest_xdist_make_scheduler"]
