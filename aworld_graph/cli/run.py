"""``aworld-graph run`` (filled in by the core engine)."""
