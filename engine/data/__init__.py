"""Data shipped with the engine: the count table (engine.count_table)."""
