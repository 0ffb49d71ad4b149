"""Datasets that workloads send: records built deterministically or read from disk."""
