"""The GPU engine library: a workload, targets and an estimator in, one result per target out.

Second floor, on the domain (`understudy`), beside the ledger and the client and importing neither: the host probe,
the restrictions and their child processes, timing, the bench, op counting and the estimators. It imports torch;
the API never imports it. The worker service (`worker`), offline evaluation (`evaluation`) and the CLI run it.
"""
