"""The policy engine: one event interface (``protocol``), policies behind it, two drivers."""
