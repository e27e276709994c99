"""The `understudy` command: the top floor, free to import every layer below it.

`main` holds the one-shot commands (predict, targets, evaluate) and `service` the service's (serve, worker, keys,
population); `local` is the one-shot prediction with its SQLite cache. `python -m cli` runs it from a source tree.
"""
