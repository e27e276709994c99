"""The worker service: one process per GPU that takes jobs from its queues and runs them through the engine.

Third floor, beside the API (`app`) and offline evaluation (`evaluation`), importing neither: `main` is the process
(probe, GPU lock, heartbeat, reconciler, job processes), `tasks` the rq job that claims ledger rows and predicts them.
"""
