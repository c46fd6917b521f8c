"""Apache Kafka with the listeners a company cluster has: SASL_SSL (SCRAM-SHA-256/512 and PLAIN
users) and SSL that requires a client certificate, beside the PLAINTEXT one the broker checks
itself on. Certificates are made here with `cryptography`: an authority, the broker's
certificate (for 127.0.0.1), a client's, and another authority nobody trusts.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from memstream.runtime.servers import ApacheKafkaBroker
from memstream.runtime.servers.loopback import LOOPBACK, free_ports

SCRAM_USERS = {"alice": "alice-secret"}
PLAIN_USERS = {"plainuser": "plain-secret"}


@dataclass(frozen=True)
class Certificates:
    ca: Path
    """The authority that signed the broker's and the client's certificates (PEM)."""
    broker_keystore: Path
    """The broker's key and certificate chain, one PEM file (Kafka's PEM keystore)."""
    client_cert: Path
    client_key: Path
    stranger_ca: Path
    """An authority that signed nothing here: trusting only it, the broker is untrusted."""


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: str,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    authority: bool,
    addresses: tuple[str, ...] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=authority, path_length=None), critical=True)
    )
    if addresses:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_certificates(folder: Path) -> Certificates:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("memstream test CA", ca_key, "memstream test CA", ca_key, authority=True)
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker = _certificate(
        "kafka", broker_key, "memstream test CA", ca_key, authority=False, addresses=(LOOPBACK,)
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _certificate(
        "memstream-client", client_key, "memstream test CA", ca_key, authority=False
    )
    stranger_key = ec.generate_private_key(ec.SECP256R1())
    stranger = _certificate(
        "stranger CA", stranger_key, "stranger CA", stranger_key, authority=True
    )
    files = Certificates(
        ca=folder / "ca.pem",
        broker_keystore=folder / "broker-keystore.pem",
        client_cert=folder / "client.pem",
        client_key=folder / "client-key.pem",
        stranger_ca=folder / "stranger-ca.pem",
    )
    files.ca.write_bytes(_pem(ca))
    files.broker_keystore.write_bytes(_key_pem(broker_key) + _pem(broker) + _pem(ca))
    files.client_cert.write_bytes(_pem(client))
    files.client_key.write_bytes(_key_pem(client_key))
    files.stranger_ca.write_bytes(_pem(stranger))
    return files


@dataclass(frozen=True)
class SecuredKafka:
    broker: ApacheKafkaBroker
    certificates: Certificates
    sasl_ssl: str
    """host:port of the SASL_SSL listener."""
    mutual_tls: str
    """host:port of the SSL listener that requires a client certificate."""

    def environment(self, **overrides: str) -> dict[str, str]:
        """The settings of a client logging in as alice with SCRAM-SHA-256 over TLS."""
        return {
            "KAFKA_BOOTSTRAP_SERVERS": self.sasl_ssl,
            "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
            "KAFKA_SASL_USERNAME": "alice",
            "KAFKA_SASL_PASSWORD": SCRAM_USERS["alice"],
            "KAFKA_SSL_CAFILE": str(self.certificates.ca),
            **overrides,
        }


def _jaas(module: str, users: dict[str, str] | None = None) -> str:
    entries = "".join(f' user_{name}="{secret}"' for name, secret in (users or {}).items())
    return f"org.apache.kafka.common.security.{module} required{entries};"


@contextmanager
def secured_kafka(workdir: Path) -> Iterator[SecuredKafka]:
    certificates = make_certificates(workdir / "certificates")
    sasl_port, tls_port = free_ports(2)
    sasl_ssl, mutual_tls = f"{LOOPBACK}:{sasl_port}", f"{LOOPBACK}:{tls_port}"
    scram = [
        f"SCRAM-SHA-{bits}=[name={name},password={secret}]"
        for bits in (256, 512)
        for name, secret in SCRAM_USERS.items()
    ]
    broker = ApacheKafkaBroker(workdir / "broker", format_arguments=_add_scram(scram))
    properties: dict[str, Any] = {
        "listeners": f"PLAINTEXT://{LOOPBACK}:{broker.port},CONTROLLER://{LOOPBACK}:"
        f"{broker.controller_port},SASL_SSL://{sasl_ssl},SSL://{mutual_tls}",
        "advertised.listeners": f"PLAINTEXT://{broker.advertised_address},"
        f"SASL_SSL://{sasl_ssl},SSL://{mutual_tls}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
        "SASL_SSL:SASL_SSL,SSL:SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER",
        # Kafka's default OAUTHBEARER validator accepts unsecured (unsigned) tokens: enough to
        # test that a client reads and sends its token, not a production setting.
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": _jaas(
            "oauthbearer.OAuthBearerLoginModule"
        ),
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": _jaas("scram.ScramLoginModule"),
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": _jaas("scram.ScramLoginModule"),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas(
            "plain.PlainLoginModule", PLAIN_USERS
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certificates.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certificates.ca),
        "listener.name.ssl.ssl.client.auth": "required",
    }
    broker.properties.update(properties)
    with broker:
        yield SecuredKafka(broker, certificates, sasl_ssl, mutual_tls)


def unsecured_token(subject: str, lifetime: float = 3_600.0) -> str:
    """An unsigned JWT (`alg: none`) that Kafka's default OAUTHBEARER validator accepts."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    now = time.time()
    claims = {"sub": subject, "iat": now, "exp": now + lifetime}
    return f"{part({'alg': 'none'})}.{part(claims)}."


def _add_scram(credentials: list[str]) -> list[str]:
    arguments: list[str] = []
    for credential in credentials:
        arguments += ["--add-scram", credential]
    return arguments
