"""TLS for the kit's clients: an `ssl.SSLContext` from an endpoint's `TLSConfig`, and
the one-line reason a handshake failed.

The CA and a client certificate arrive as PEM text (they cross to client machines in
their config); Python's `ssl` wants a client certificate and key as files, so they are
written to a private temporary file for the moment `load_cert_chain` reads them.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any

from harness.hosts.endpoint import TLSConfig


def client_context(tls: TLSConfig) -> ssl.SSLContext:
    """A client context: the CA given (else the system's), hostname checked against
    `server_name` or the address, or no verification at all when `verify` is false."""
    ctx = ssl.create_default_context(cadata=tls.ca_pem) if tls.ca_pem else (
        ssl.create_default_context())
    if not tls.verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert_pem:
        fd, path = tempfile.mkstemp(prefix="kvbench-tls-", suffix=".pem")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(tls.cert_pem + "\n" + (tls.key_pem or ""))
            ctx.load_cert_chain(path)
        finally:
            os.unlink(path)
    return ctx


def server_hostname(tls: TLSConfig, host: str) -> str:
    """The name the server's certificate must carry."""
    return tls.server_name or host


def tls_kwargs(tls: TLSConfig | None, host: str) -> dict[str, Any]:
    """`loop.create_connection`'s TLS arguments for an endpoint ({} without TLS)."""
    if tls is None:
        return {}
    return {"ssl": client_context(tls), "server_hostname": server_hostname(tls, host)}


def handshake_problem(exc: BaseException) -> str | None:
    """What to fix for a TLS failure (None: not a TLS failure)."""
    text = str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        if "hostname mismatch" in text.lower() or "ip address mismatch" in text.lower():
            return ("the certificate is for another name: set tls.server_name to the "
                    "name it carries")
        return ("its certificate is not signed by a CA the kit trusts: give "
                "tls.ca_file (the CA that signed it)")
    if isinstance(exc, ssl.SSLError):
        if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text:
            return "it does not speak TLS on that port: drop tls, or use its TLS port"
        if "certificate required" in text.lower() or "CERTIFICATE_REQUIRED" in text:
            return "it wants a client certificate: give tls.cert_file and tls.key_file"
        return f"the TLS handshake failed ({text})"
    return None
