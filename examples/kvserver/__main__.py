"""`python -m examples.kvserver --port P --data-dir D [-c SIZE] [-s FIFO|LRU|LFU]`."""

import asyncio
import contextlib

from .server import main

with contextlib.suppress(KeyboardInterrupt):
    asyncio.run(main())
