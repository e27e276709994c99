"""The store: SQLAlchemy models and sessions shared by the service (Postgres) and the one-shot CLI (SQLite)."""
