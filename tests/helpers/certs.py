"""Throw-away X.509 material for the TLS tests, generated on the fly (nothing is checked in).

Usage::

    from tests.helpers.certs import make_pki

    pki = make_pki(tmp_path)          # a CA, a server cert (localhost, 127.0.0.1, ::1), a client cert
    pki.ca_file, pki.server_cert, pki.server_key, pki.client_cert, pki.client_key
    pki.client_context()              # ssl.SSLContext a client uses (trusts the CA, presents the client cert)

``make_pki`` caches the keys per process (EC P-256, fast to generate) so a test session pays for the
key generation once; every call still writes fresh files into the given directory.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki", "make_pki", "make_cert"]


def _name(cn: str, org: str = "natsd tests") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_cert(
    subject: x509.Name,
    key,
    issuer: x509.Name,
    issuer_key,
    *,
    ca: bool = False,
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    emails: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
    days: int = 2,
):
    now = _dt.datetime.now(_dt.timezone.utc)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    sans: list = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    sans += [x509.RFC822Name(e) for e in emails]
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    if usages:
        b = b.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if ca:
        b = b.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    return b.sign(issuer_key, hashes.SHA256())


@dataclass
class Pki:
    dir: Path
    ca_file: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    other_ca_file: str  # a second, unrelated CA (certs it did not sign must be refused)
    other_client_cert: str
    other_client_key: str

    def client_context(self, *, with_cert: bool = True, hostname_check: bool = True) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ca_file)
        ctx.check_hostname = hostname_check
        if with_cert:
            ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx


_CACHE: dict[str, object] = {}


def make_pki(
    directory: Path | str,
    *,
    client_cn: str = "client",
    client_emails: tuple[str, ...] = (),
    server_dns: tuple[str, ...] = ("localhost", "server.natsd.test"),
) -> Pki:
    """Write a CA, a server and a client certificate (with keys) into ``directory``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if not _CACHE:
        _CACHE.update(ca_key=_key(), srv_key=_key(), cli_key=_key(), other_key=_key(), other_cli=_key())
    ca_key, srv_key, cli_key = _CACHE["ca_key"], _CACHE["srv_key"], _CACHE["cli_key"]
    other_key, other_cli_key = _CACHE["other_key"], _CACHE["other_cli"]
    ca_name = _name("natsd test CA")
    ca = make_cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    srv = make_cert(_name("localhost"), srv_key, ca_name, ca_key, dns=server_dns, ips=("127.0.0.1", "::1"), server=True)
    cli = make_cert(_name(client_cn), cli_key, ca_name, ca_key, emails=client_emails, client=True)
    other_name = _name("other CA")
    other = make_cert(other_name, other_key, other_name, other_key, ca=True)
    other_cli = make_cert(_name(client_cn), other_cli_key, other_name, other_key, client=True)

    def write(name: str, data: bytes) -> str:
        p = d / name
        p.write_bytes(data)
        return str(p)

    pem = serialization.Encoding.PEM
    return Pki(
        dir=d,
        ca_file=write("ca.pem", ca.public_bytes(pem)),
        server_cert=write("server-cert.pem", srv.public_bytes(pem)),
        server_key=write("server-key.pem", _pem_key(srv_key)),
        client_cert=write("client-cert.pem", cli.public_bytes(pem)),
        client_key=write("client-key.pem", _pem_key(cli_key)),
        other_ca_file=write("other-ca.pem", other.public_bytes(pem)),
        other_client_cert=write("other-client-cert.pem", other_cli.public_bytes(pem)),
        other_client_key=write("other-client-key.pem", _pem_key(other_cli_key)),
    )
