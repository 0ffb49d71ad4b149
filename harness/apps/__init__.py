"""Reference applications the harness starts as targets of a study (ASGI apps).

They are small on purpose: a study measures the server stack and the stores behind the
app, so the app itself should be easy to read and cost little.
"""
