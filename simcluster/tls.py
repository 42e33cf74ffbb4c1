"""HTTPS for simcluster, as a real API server serves it: a certificate for its address signed by
a cluster CA, both made here with `cryptography` (ECDSA P-256: milliseconds, not RSA's tenths).

    ca = CertificateAuthority("simcluster-ca")
    context = ca.server_context("127.0.0.1")   # what SimHTTPServer wraps its connections with
    ca.pem                                     # what a client verifies against

Nothing is written outside a temporary directory: `ssl` loads a certificate chain only from
files, so the pair is written there, loaded, and the directory deleted at once.
"""

from __future__ import annotations

import ipaddress
import ssl
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = timedelta(days=2)
CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
    key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
    decipher_only=False,
)  # fmt: skip


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


class CertificateAuthority:
    """A self-signed CA that issues server certificates. Two instances are two unrelated CAs:
    a client given one refuses a server whose certificate the other signed."""

    def __init__(self, common_name: str = "simcluster-ca") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(CA_KEY_USAGE, critical=True)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pem(self) -> str:
        """The CA certificate, PEM: what a kubeconfig's certificate-authority-data carries."""
        return self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    def issue(self, host: str) -> tuple[bytes, bytes]:
        """(certificate PEM, private key PEM) of a server certificate for `host` (an address
        or a DNS name, put in subjectAltName: what clients check)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(host))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.SubjectAlternativeName([_san(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return certificate.public_bytes(serialization.Encoding.PEM), key_pem

    def server_context(self, host: str) -> ssl.SSLContext:
        """A server-side SSL context presenting a certificate for `host` signed by this CA."""
        certificate, key = self.issue(host)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        with tempfile.TemporaryDirectory(prefix="simcluster-tls-") as folder:
            chain, private = Path(folder, "server.crt"), Path(folder, "server.key")
            chain.write_bytes(certificate)
            private.touch(mode=0o600)
            private.write_bytes(key)
            context.load_cert_chain(chain, private)
        return context
