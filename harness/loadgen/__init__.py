"""The load generator: the timed loop of one client process.

- `config`: the runner-worker contract (`ClientConfig`);
- `recorder`: per-op records in preallocated columns (`Recorder`);
- `run`: one process's run (`ClientRun`): connections, slots, open-loop pacing, failures;
- `fastpaths`: the Python fast paths (callback chain, batched pipe).
"""

from harness.loadgen.config import ClientConfig, Ticket
from harness.loadgen.recorder import Recorder
from harness.loadgen.run import ClientRun

__all__ = ["ClientConfig", "ClientRun", "Recorder", "Ticket"]
