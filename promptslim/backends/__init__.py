"""Heavy, optional parts, imported lazily where they are used (see ``models`` for loading)."""
