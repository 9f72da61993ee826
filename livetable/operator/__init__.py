"""The operator integration: everything that talks to, or stands in for, an operator.

An operator puts its players at a table (a signed launch) and, in seamless mode, holds
their money: livetable debits its wallet per slip and credits or rolls back per round.
That path is one package, so a reader finds it whole:

* :mod:`livetable.operator.signatures` — HMAC signatures of operator traffic, both ways;
* :mod:`livetable.operator.calls` — the wallet calls' bodies and answer on the wire;
* :mod:`livetable.operator.client` — the HTTP client that makes the calls;
* :mod:`livetable.operator.log` — the wallet log's records, ids and contract;
  :mod:`livetable.operator.log_sqlite` and :mod:`livetable.operator.log_postgres` keep it;
* :mod:`livetable.operator.seamless` — the seamless wallet: debits, the sweeper, the
  outbox of credits and rollbacks;
* :mod:`livetable.operator.report` — the wallet report an operator reconciles with;
* :mod:`livetable.operator.reference` — a reference operator (``livetable operator-demo``).

Nothing is imported here: the store layer and the CLI import only the module they need.
"""
