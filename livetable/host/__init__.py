"""The table host: what runs a table's engine in a process — the runner that drives one
engine and stores its steps, the leases and fencing of scale-out, the ledger's watch."""
