"""Protocol clients used by the load generator, one module per protocol.

They are minimal on purpose: a Python load generator keeps up with C tools only when the
client parses as little as possible and keeps many requests in flight per connection.
"""
