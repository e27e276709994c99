"""The ledger: the prediction rows that are the service's truth, and the queues that only carry them.

Second floor, on the domain (`understudy`): SQLAlchemy models and sessions (`models`, `db`), every state change of
a prediction row (`predictions`), stored calibrations read back (`calibrations`), queue names and Redis keys
(`queues`), and the jobs that carry rows to workers and back when Redis loses them (`dispatch`). Rows are filed under
the cache identity that understudy.keys decides, for the API and the engine alike. Shared by the API, the worker
service and the CLI's local cache (Postgres for the service, SQLite for the CLI). No torch.
"""
