"""The HTTP API (FastAPI): third floor, on the ledger and the domain; it imports no GPU code and no torch."""
