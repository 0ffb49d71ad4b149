"""Performance-evaluation kit for key-value stores and caches.

Importing this package does nothing but define things: no logging setup, no I/O.
"""

__version__ = "0.2.0"
