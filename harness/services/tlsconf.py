"""TLS for servers: the `tls` setting, a throwaway CA for the servers the kit starts, and
the client side of a server at an address.

    services:
      kv: {kind: redis, host: server, settings: {tls: true}}      # the kit's, over TLS
      cache: {kind: redis, address: "cache.example:6380",          # a user's, TLS only
              tls: {ca_file: ~/ca.pem, server_name: cache.example}}

`tls: true` on a launched server starts it serving TLS only, with a certificate from a
CA made for that start (its key never leaves the server's work directory), so TLS can be
a grid key (`services.kv.settings.tls: [false, true]`) and its cost measured. On a server
at an address, `tls` is how to reach it: `true` trusts the system's CAs, a mapping names
the CA, a client certificate and key, the name to check, or `verify: false`.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.errors import ServiceError
from harness.hosts import Host
from harness.hosts.endpoint import TLSConfig
from harness.settings import Setting

TLS_FIELDS = ("ca_file", "cert_file", "key_file", "server_name", "verify")
TLS_SETTING = Setting((bool, dict), False, "serve TLS only, with a certificate of a CA made "
                      "for this start (an address: how to reach it, {ca_file, cert_file, "
                      "key_file, server_name, verify})")
#: A PEM file read for TLS is at most this long (a certificate chain, not a document).
MAX_PEM_BYTES = 1 << 20


def tls_problems(value: Any, at_address: bool) -> list[str]:
    """Why a `tls` value cannot be used (messages without a prefix)."""
    if isinstance(value, bool) or value is None:
        return []
    if not at_address:
        return ["tls: true or false for a server the kit starts (its certificate comes "
                "from a CA made for each start)"]
    if not isinstance(value, Mapping):
        return [f"tls: expected true, false or {{{', '.join(TLS_FIELDS)}}}"]
    out = [f"tls.{k}: unknown field (fields: {', '.join(TLS_FIELDS)})"
           for k in value if k not in TLS_FIELDS]
    for k in ("ca_file", "cert_file", "key_file", "server_name"):
        if k in value and (not isinstance(value[k], str) or not value[k]):
            out.append(f"tls.{k}: expected a non-empty string")
    if "verify" in value and not isinstance(value["verify"], bool):
        out.append("tls.verify: expected true or false")
    if ("cert_file" in value) != ("key_file" in value):
        out.append("tls: a client certificate needs both cert_file and key_file")
    return out


def _pem(name: str, key: str, path: str) -> str:
    p = Path(path).expanduser()
    try:
        with p.open("rb") as f:
            data = f.read(MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise ServiceError(f"services.{name}.tls.{key}: {p}: {exc.strerror or exc}") from None
    if len(data) > MAX_PEM_BYTES or b"-----BEGIN " not in data:
        raise ServiceError(f"services.{name}.tls.{key}: {p} is not a PEM file")
    return data.decode(errors="replace")


def address_tls(spec: Any) -> TLSConfig | None:
    """The client side of TLS to the server at `spec.address` (a spec's ServiceSpec), its
    files read now on this (the control) machine; None without TLS."""
    value = spec.settings.get("tls")
    if not value:
        return None
    if value is True:
        return TLSConfig()
    return TLSConfig(
        ca_pem=_pem(spec.name, "ca_file", value["ca_file"]) if "ca_file" in value else None,
        cert_pem=(_pem(spec.name, "cert_file", value["cert_file"])
                  if "cert_file" in value else None),
        key_pem=_pem(spec.name, "key_file", value["key_file"]) if "key_file" in value else None,
        server_name=value.get("server_name"), verify=value.get("verify", True))


def throwaway_ca(names: list[str]) -> tuple[str, str, str]:
    """(CA certificate, server certificate, server key), PEM, for `names` (addresses or
    host names): a CA made now, valid for a week, whose key is discarded at once."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kvbench throwaway CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=7))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                       crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False,
                                       decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for n in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            alt.append(x509.DNSName(n))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return (ca.public_bytes(pem).decode(), cert.public_bytes(pem).decode(),
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode())


def server_files(host: Host, workdir: str, names: list[str]) -> tuple[TLSConfig, str, str]:
    """A throwaway CA's certificate and key for a server on `host`, written to
    `workdir` (mode 0600); the clients' TLSConfig and the two paths."""
    ca, cert, key = throwaway_ca(names)
    cert_path, key_path = f"{workdir}/tls-cert.pem", f"{workdir}/tls-key.pem"
    for path, text in ((cert_path, cert), (key_path, key)):
        host.run(["sh", "-c", 'umask 077; cat > "$1"', "sh", path], input=text)
    return TLSConfig(ca_pem=ca, server_name=names[0]), cert_path, key_path
