"""livetable — a real-time live table for the card game Pok Deng."""

__version__ = "0.1.0"
