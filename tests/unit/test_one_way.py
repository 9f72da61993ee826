"""One way to do each thing: one home for the betting rules, one import path for
their names, one builder of ``bet_settled``, distinct names for a dealer's command and the
ledger's effect that share the wire name ``cancel_round``.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import get_args

import livetable
from livetable import protocol as p
from livetable.betting import slips as bets
from livetable.engine.effects import Effect

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "livetable").rglob("*.py"))


def _modules() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(livetable.__path__, "livetable.")]


def test_the_betting_rules_are_pure() -> None:
    """betting/slips.py imports the protocol and the rules, nothing with I/O."""
    tree = ast.parse((ROOT / "livetable/betting/slips.py").read_text())
    ours = {node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("livetable")}
    ours |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for a in node.names if a.name.startswith("livetable")}
    assert ours <= {"livetable", "livetable.rules"}, ours


def test_the_rules_names_have_one_import_path() -> None:
    """No other module offers them again: ``BetRequest`` was imported from three paths
    (``livetable.store``, ``livetable.store.base``, ``livetable.store.bets``)."""
    rules = {name for name in vars(bets) if not name.startswith("_")
             and getattr(getattr(bets, name), "__module__", None) == bets.__name__}
    assert {"BetRequest", "SlipRequest", "Rejection", "judge_slip", "precheck"} <= rules
    offered = []
    for name in _modules():
        if name == bets.__name__:
            continue
        module = importlib.import_module(name)
        again = rules & set(getattr(module, "__all__", ()))
        if again:
            offered.append(f"{name}.__all__: {sorted(again)}")
    assert not offered, offered
    import livetable.store
    assert not hasattr(livetable.store, "BetRequest")


def test_one_builder_of_bet_settled() -> None:
    builders = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("p.BetSettled",
                                                                         "BetSettled"):
                builders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert [b.split(":")[0] for b in builders] == ["livetable/betting/slips.py"], builders


def test_a_dealer_command_and_a_ledger_effect_never_share_a_name() -> None:
    commands = {kind.__name__ for kind in get_args(p.DealerCommand)}
    effects = {kind.__name__ for kind in get_args(Effect)}
    assert not commands & effects
    # the wire names are a contract: both are still "cancel_round"
    assert "cancel_round" in p.type_names(p.DealerCommand)
    assert "cancel_round" in {kind.__struct_config__.tag for kind in get_args(Effect)}
