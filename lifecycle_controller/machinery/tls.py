"""X.509 certificates and keys, built in one place.

* :func:`self_signed_certificate`: the metrics server's serving certificate when no
  certificate folder is configured (``--metrics-secure`` without ``--metrics-cert-path``).
* :class:`CertificateAuthority`: the local control plane's CA (``devcluster``), which signs
  the apiserver's serving certificate and every client certificate (the admin identity and
  least-privilege test identities); :func:`service_account_signing_key` signs its
  ServiceAccount tokens. Those are for throw-away clusters only.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=7)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate with its PEM private key."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        """Write ``<stem>.crt`` and ``<stem>.key`` (mode 0600) and return both paths."""
        cert_path = directory / f"{stem}.crt"
        key_path = directory / f"{stem}.key"
        cert_path.write_bytes(self.cert_pem)
        key_path.write_bytes(self.key_pem)
        key_path.chmod(0o600)
        return cert_path, key_path


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates."""

    def __init__(self, common_name: str = "lifecycle-controller-devcluster-ca") -> None:
        self._key = _new_key()
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
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
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        server_hosts: tuple[str, ...] = (),
    ) -> KeyPair:
        """Issue a certificate: a client certificate, or a serving one when hosts are given.

        Kubernetes maps a client certificate's CN to the user name and each O to a group.
        """
        return _certificate(
            common_name,
            organizations=organizations,
            hosts=server_hosts,
            issuer=(self._name, self._key),
            validity=_VALIDITY,
        )


def _subject_alternative_names(hosts: tuple[str, ...]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _certificate(
    common_name: str,
    *,
    organizations: tuple[str, ...] = (),
    hosts: tuple[str, ...] = (),
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None = None,
    validity: datetime.timedelta,
) -> KeyPair:
    """A leaf certificate: serving when ``hosts`` are given, client otherwise.

    Signed by ``issuer`` (name, key), or self-signed when there is none.
    """
    key = _new_key()
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject = x509.Name(attributes)
    issuer_name, signing_key = issuer if issuer is not None else (subject, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if hosts:
        builder = builder.add_extension(_subject_alternative_names(hosts), critical=False)
        usage = [ExtendedKeyUsageOID.SERVER_AUTH]
    else:
        usage = [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    cert = builder.sign(signing_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def self_signed_certificate(hosts: tuple[str, ...] = (), *, days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed serving certificate and its key (PEM) for ``localhost``, loopback
    addresses, this host's name and ``hosts``."""
    pair = _certificate(
        "lifecycle-controller",
        hosts=("localhost", "127.0.0.1", "::1", socket.gethostname(), *hosts),
        validity=datetime.timedelta(days=days),
    )
    return pair.cert_pem, pair.key_pem


def service_account_signing_key() -> bytes:
    """An RSA private key in PEM, used both to sign and to verify service account tokens."""
    return _key_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
