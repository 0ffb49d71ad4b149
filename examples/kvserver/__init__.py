"""A small reference KV server speaking the course protocol (see README.md)."""
