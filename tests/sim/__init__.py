"""A deterministic simulation of one table: the engine, a store, players, a dealer, faults.

See :mod:`sim.harness`. Run it alone with ``PYTHONPATH=tests .venv/bin/python -m sim --help``.
"""

from sim.harness import SimConfig, Simulation, SimulationFailure, Stats

__all__ = ["SimConfig", "Simulation", "SimulationFailure", "Stats"]
