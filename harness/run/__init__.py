"""Running experiments: the control machine's runner and what it drives on client
machines (agents, workers, their records' transfer, live status, recovery).

Kept light: client machines run ``python -m harness.run.worker`` (through the
`harness.worker` entry point), which imports this first.
"""
