"""The PostgreSQL store: the system of record for scale-out (``--postgres URL``).

Redis stays the bus (pub/sub), the dealer commands' queues and the table leases; every
amount of money, every bet, slip, round and event lives in PostgreSQL, whose synchronous
standby has each acknowledged transaction before it is acknowledged. Modules: ``store``
(the :class:`PostgresStore` class: connections, transactions, reads), ``ledger`` (transfers
and the audit), ``slips`` (group commit of slips), ``steps`` (engine steps, fencing,
chunked settlement), ``sessions`` (operators' sessions), ``replication`` (what the
primary promises a bet: its synchronous standby), ``schema`` (migrations),
``wallet`` (the seamless wallet's log).
"""

from livetable.store.postgres.store import PostgresStore, is_pg_outage

__all__ = ["PostgresStore", "is_pg_outage"]
