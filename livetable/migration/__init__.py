"""Retired layouts and the tools that move their money: the Redis ledger's reader and
``livetable migrate-store``. Nothing of the live service imports this package."""
