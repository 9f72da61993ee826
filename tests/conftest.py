"""Shared test configuration.

This file's presence puts ``tests/`` on ``sys.path`` (pytest's rootdir-relative "prepend"
import mode), so that helpers kept beside the tests import by name: ``sim`` (the simulation
harness, ``tests/sim/``).
"""
