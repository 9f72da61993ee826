"""The dealer commands are named once, by the protocol's tagged union (``DealerCommand``).

Every other list of them is derived from it or checked against it here: the engine's
commands and transition table, the terminal console, the browser console (no build step,
so its names are read from the file), the console's labels in every language, and the
table of commands in docs/protocol.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import msgspec
import pytest

from livetable import protocol as p
from livetable.cli.terminal import command_of
from livetable.engine.transitions import TRANSITIONS, Announcement, Command, Move

ROOT = Path(__file__).resolve().parents[2]
DEALER = set(p.DEALER_COMMANDS)
#: What a console sends by itself, not at a dealer's click: the connection's keepalive.
BY_THE_CONNECTION = {"ping"}


def test_the_protocol_lists_every_dealer_command() -> None:
    assert p.DEALER_COMMANDS == ("start_shoe", "open_betting", "close_betting", "card",
                                 "reveal", "pause", "resume", "cancel_round", "set_mode",
                                 "correct_cards", "approve_correction", "round_cards", "ping",
                                 "chat_send", "chat_mute", "chat_delete", "dealer_sign_in")
    assert set(p.CHAT_COMMANDS) <= DEALER


def test_the_chat_commands_are_the_gateways_own() -> None:
    # the chat and the presenter never reach a table's engine
    assert set(p.CHAT_COMMANDS) == {"chat_send", "chat_mute", "chat_delete", "dealer_sign_in"}
    assert not set(p.CHAT_COMMANDS) & set(p.type_names(p.TableCommand))


def test_the_engine_takes_every_table_command_but_the_read() -> None:
    # correct_cards reaches the table as void_cards (with the names of both tokens),
    # approve_correction is answered by the gateway (it signs the approval), and
    # round_cards is a read the runner answers without a step.
    table = set(p.type_names(p.TableCommand))
    assert table == (DEALER - {"correct_cards", "approve_correction", "ping"}
                     - set(p.CHAT_COMMANDS)) | {"void_cards"}
    assert set(get_args(Command)) == table - {"round_cards"}


def test_every_engine_command_has_a_row_in_the_transition_table() -> None:
    commands = {command for (_, command) in TRANSITIONS}
    assert commands == set(get_args(Command)) | set(get_args(Move)) | set(get_args(Announcement))


def test_the_terminal_console_has_a_word_for_every_command() -> None:
    lines = ["shoe", "open", "close", "KH", "reveal", "pause", "resume", "cancel", "auto",
             "void 1", "approve 1", "cards", "ping", "say hello", "mute p1 5", "delete 1-1",
             "dealer Anna"]
    names = set()
    for line in lines:
        command = command_of(line)
        assert command is not None
        names.add(command.__struct_config__.tag)
    assert names == DEALER


def test_the_browser_console_sends_every_command_by_its_name() -> None:
    source = (ROOT / "static/js/dealer.js").read_text()
    sent = set(re.findall(r"""\btype:\s*"([a-z_]+)\"""", source))
    assert sent == DEALER - BY_THE_CONNECTION


@pytest.mark.parametrize("lang", ["en", "th", "hi"])
def test_the_console_labels_every_command(lang: str) -> None:
    source = (ROOT / f"static/js/i18n/{lang}.js").read_text()
    labelled = set(re.findall(r'"cmd\.([a-z_]+)":', source))
    assert labelled == DEALER - BY_THE_CONNECTION


def test_docs_protocol_tables_every_command() -> None:
    doc = (ROOT / "docs/protocol.md").read_text()
    header = "| command | fields | legal in phase | effect |"
    assert header in doc
    rows = doc.split(header, 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    documented = [re.match(r"\| `([a-z_]+)` \|", row) for row in rows]
    assert all(documented), rows
    assert sorted(m.group(1) for m in documented if m) == sorted(p.DEALER_COMMANDS)


# --- the console follows the table by its events (no polling) -----------------------------


def _struct_fields(*kinds: type[msgspec.Struct]) -> set[str]:
    return {name for kind in kinds for name in kind.__struct_fields__} | {"type"}


def test_the_browser_console_reads_the_table_from_events_only() -> None:
    source = (ROOT / "static/js/dealer.js").read_text()
    # one look at the list of tables to choose from; the table itself comes over the socket
    assert re.findall(r"getJSON\(([^)]*)\)", source) == ['"/api/tables"']
    assert "fetch(" not in source
    assert re.findall(r"setInterval\(([^)]*)\)", source) == ["tick, 250"]  # the countdown


def test_state_js_applies_every_table_event_and_reads_only_what_is_sent() -> None:
    source = (ROOT / "static/js/state.js").read_text()
    events = p.type_names(p.AnyTableEvent)
    applied = set(re.findall(r'case "([a-z_]+)":', source))
    assert applied == set(events) - {"shoe_revealed"}  # verify.js keeps the revealed shoes
    sent = _struct_fields(*get_args(p.AnyTableEvent))
    assert set(re.findall(r"\bev\.([a-z_]+)", source)) <= sent
    snapshot = source.split("export function fromSnapshot", 1)[1].split("\n}\n", 1)[0]
    assert set(re.findall(r"\bs\.([a-z_]+)", snapshot)) <= _struct_fields(p.TableSnapshot)
