"""Certificates made by the tests: a CA, a broker certificate and a client certificate, in PEM.

Why generated, not checked in: a key in the repository is a key anyone has, and a certificate
in the repository expires one day and breaks the suite. Each test session makes its own CA
(valid for a day) with the ``cryptography`` library.

The broker certificate names ``127.0.0.1`` (SAN IP) and ``localhost`` (SAN DNS), so clients
verify the host name (librdkafka's default ``ssl.endpoint.identification.algorithm: https``)
against the bootstrap address of the embedded brokers. Brokers read PEM directly
(``ssl.keystore.type=PEM``): :meth:`Pki.write` lays the files out for them and for clients.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Issued", "Pki", "TlsFiles", "issue", "make_ca", "make_pki"]

_VALIDITY = datetime.timedelta(days=1)
_CLOCK_SKEW = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class Issued:
    """A private key and its certificate."""

    key: rsa.RSAPrivateKey
    cert: x509.Certificate

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self, password: str | None = None) -> bytes:
        """The key as PKCS#8 PEM (what Kafka's PEM keystore reads), encrypted with
        ``password`` when one is given."""
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )


@dataclass(frozen=True)
class TlsFiles:
    """Where :meth:`Pki.write` put the PEM files."""

    ca: Path
    """The CA certificate: the truststore of brokers and clients."""
    broker_keystore: Path
    """The broker's unencrypted key followed by its certificate and the CA's (a PEM keystore)."""
    client_cert: Path
    """The client's certificate followed by the CA's."""
    client_key: Path
    """The client's key, encrypted with the password given to :meth:`Pki.write`."""


@dataclass(frozen=True)
class Pki:
    """A CA with a broker certificate and a client certificate it signed."""

    ca: Issued
    broker: Issued
    client: Issued

    def write(self, directory: Path, client_key_password: str) -> TlsFiles:
        directory.mkdir(parents=True, exist_ok=True)
        files = TlsFiles(
            directory / "ca.pem",
            directory / "broker-keystore.pem",
            directory / "client-cert.pem",
            directory / "client-key.pem",
        )
        files.ca.write_bytes(self.ca.cert_pem())
        files.broker_keystore.write_bytes(
            self.broker.key_pem() + self.broker.cert_pem() + self.ca.cert_pem()
        )
        files.client_cert.write_bytes(self.client.cert_pem() + self.ca.cert_pem())
        files.client_key.write_bytes(self.client.key_pem(client_key_password))
        for path in (files.broker_keystore, files.client_key):
            path.chmod(0o600)
        return files


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "k2k tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def make_ca(common_name: str = "k2k test CA") -> Issued:
    """A self-signed CA certificate that may sign end-entity certificates only."""
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(key, cert)


def issue(
    ca: Issued,
    common_name: str,
    usage: x509.ObjectIdentifier,
    alt_names: list[x509.GeneralName] | None = None,
) -> Issued:
    """An end-entity certificate signed by ``ca`` for ``usage`` (server or client auth)."""
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return Issued(key, builder.sign(ca.key, hashes.SHA256()))


def make_pki(client_common_name: str) -> Pki:
    """A fresh CA, a broker certificate for 127.0.0.1/localhost, and a client certificate
    whose subject is ``CN=<client_common_name>,O=k2k tests``."""
    ca = make_ca()
    broker = issue(
        ca,
        "localhost",
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
    )
    client = issue(ca, client_common_name, ExtendedKeyUsageOID.CLIENT_AUTH)
    return Pki(ca, broker, client)
