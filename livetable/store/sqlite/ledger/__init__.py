"""The SQLite ledger: one synchronous owner of the database, and its operations as typed
calls.

* :mod:`~livetable.store.sqlite.ledger.schema` — the migrations (the wallet log's tables among
  them), opening a connection, which SQLite errors are outages, the transaction;
* :mod:`~livetable.store.sqlite.ledger.core` — ``Ledger``: the connection, and ``post``,
  the one way a balance changes, with the ledger's invariants checked on every transfer;
* :mod:`~livetable.store.sqlite.ledger.accounts`, :mod:`~livetable.store.sqlite.ledger.slips`,
  :mod:`~livetable.store.sqlite.ledger.steps`, :mod:`~livetable.store.sqlite.ledger.reads` — the
  operations, plain functions of the ledger, their SQL in constants beside them;
* :mod:`~livetable.store.sqlite.ledger.calls` — each operation as a msgspec Struct with a typed
  answer, and ``perform``, the one place that runs them.

Nothing here is async and nothing here knows who runs it: the SQLite store
(store/sqlite/__init__.py) runs the calls on its writer thread, or hands them to its writer process
(store/sqlite/writer.py), which runs them on a ledger of its own.
"""
