"""How every Kafka client of memstream authenticates and encrypts: one description, all clients.

The stages (Faust apps), the SDK producer, admin, replay, the events feed, status and the dead
letter commands build their clients from one `KafkaSecurity` (docs/operations.md, "A
secured Kafka"): `client_options` for aiokafka's producers, consumers and admin, `faust_credentials`
for a stage's app. `check_broker` opens one connection the way they would and turns what went
wrong into a sentence naming the setting to fix, so a wrong password or an untrusted
certificate ends a process at once instead of leaving it retrying in silence.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiokafka import errors
from aiokafka.abc import AbstractTokenProvider
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import create_conn
from aiokafka.helpers import create_ssl_context
from aiokafka.protocol.metadata import MetadataRequest

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]

SETTING_NAMES: Mapping[str, str] = {
    "protocol": "KAFKA_SECURITY_PROTOCOL (kafka.security_protocol)",
    "mechanism": "KAFKA_SASL_MECHANISM (kafka.sasl_mechanism)",
    "credentials": "KAFKA_SASL_USERNAME / KAFKA_SASL_PASSWORD (kafka.sasl_username, "
    "kafka.sasl_password)",
    "token": "KAFKA_SASL_OAUTH_TOKEN_FILE (kafka.sasl_oauth_token_file)",
    "ca": "KAFKA_SSL_CAFILE (kafka.ssl_cafile)",
    "hostname": "KAFKA_SSL_CHECK_HOSTNAME (kafka.ssl_check_hostname)",
    "certificate": "KAFKA_SSL_CERTFILE / KAFKA_SSL_KEYFILE (kafka.ssl_certfile, kafka.ssl_keyfile)",
    "servers": "KAFKA_BOOTSTRAP_SERVERS (kafka.bootstrap_servers)",
}
"""The settings a problem names: environment variable, then the configuration key."""


class KafkaAccessError(RuntimeError):
    """The broker cannot be used with these settings; the message names the one to fix.
    `refused`: a broker answered and said no (credentials, certificate, mechanism), which no
    amount of waiting mends; otherwise none could be reached (an outage, or a listener that
    does not speak the configured protocol)."""

    def __init__(self, message: str, *, refused: bool) -> None:
        super().__init__(message)
        self.refused = refused


class TokenFile(AbstractTokenProvider):  # type: ignore[misc]
    """An OAUTHBEARER token read from a file at every (re)authentication, so whatever renews
    the file (a sidecar, a Kubernetes projected token) renews memstream's token."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    async def token(self) -> str:
        text = await asyncio.to_thread(self.path.read_text, encoding="utf-8")
        return text.strip()


@dataclass(frozen=True)
class KafkaSecurity:
    """The security settings of every Kafka connection (module doc)."""

    protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    sasl_oauth_token_file: str | None = None
    ssl_cafile: str | None = None
    """Certificates of the authorities that sign the brokers' certificates (unset: the
    system's)."""
    ssl_certfile: str | None = None
    """This client's certificate (PEM), for brokers that require one (mutual TLS)."""
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of a connection (None without TLS); a missing or unreadable file
        is a `KafkaAccessError` naming its setting."""
        if not self.uses_ssl:
            return None
        try:
            context: ssl.SSLContext = create_ssl_context(
                cafile=self.ssl_cafile,
                certfile=self.ssl_certfile,
                keyfile=self.ssl_keyfile,
                password=self.ssl_key_password,
            )
        except FileNotFoundError as exc:
            setting = "ca" if exc.filename == self.ssl_cafile else "certificate"
            raise KafkaAccessError(
                f"{exc.filename}: no such file (set {SETTING_NAMES[setting]})", refused=True
            ) from exc
        except ssl.SSLError as exc:
            raise KafkaAccessError(
                f"cannot load the TLS files ({exc.reason or exc}): check "
                f"{SETTING_NAMES['ca']} and {SETTING_NAMES['certificate']}",
                refused=True,
            ) from exc
        context.check_hostname = self.ssl_check_hostname
        return context

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for aiokafka's producers, consumers and admin client."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.uses_ssl:
            options["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            options["sasl_mechanism"] = self.sasl_mechanism
            if self.sasl_mechanism == "OAUTHBEARER":
                options["sasl_oauth_token_provider"] = TokenFile(self.sasl_oauth_token_file or "")
            else:
                options["sasl_plain_username"] = self.sasl_username
                options["sasl_plain_password"] = self.sasl_password
        return options

    def faust_credentials(self) -> Any:
        """The `broker_credentials` of a stage's Faust app (None for PLAINTEXT)."""
        import faust

        context = self.ssl_context()
        if not self.uses_sasl:
            return faust.SSLCredentials(context) if context is not None else None
        if self.sasl_mechanism == "OAUTHBEARER":
            return faust.OAuthCredentials(
                oauth_cb=TokenFile(self.sasl_oauth_token_file or ""), ssl_context=context
            )
        return faust.SASLCredentials(
            username=self.sasl_username,
            password=self.sasl_password,
            ssl_context=context,
            mechanism=self.sasl_mechanism,
        )


PLAINTEXT = KafkaSecurity()
"""No TLS, no login: the embedded brokers, and any broker on a trusted network."""


async def check_broker(
    bootstrap_servers: str, security: KafkaSecurity, *, timeout: float = 15.0
) -> None:
    """Connect to the first bootstrap server that answers, as every client would (TLS, SASL);
    `KafkaAccessError` naming the setting to fix when none can be used (`refused` as soon as
    one refuses)."""
    problems: list[str] = []
    for server in [s.strip() for s in bootstrap_servers.split(",") if s.strip()]:
        host, _, port = server.rpartition(":")
        connection = None
        try:
            connection = await asyncio.wait_for(
                create_conn(
                    host or server,
                    int(port or 9092),
                    client_id="memstream-check",
                    request_timeout_ms=int(timeout * 1000),
                    **security.client_options(),
                ),
                timeout,
            )
            metadata = await asyncio.wait_for(connection.send(MetadataRequest([])), timeout)
            if not metadata.brokers:
                # aiokafka takes the broker's answer to a refused OAUTHBEARER token
                # ({"status": "invalid_token"}) for a success; the session then serves nothing.
                raise errors.SaslAuthenticationFailed("the broker did not accept the login")
        except KafkaAccessError:
            raise
        except Exception as exc:  # every failure is turned into a sentence below
            problem = _explained(server, security, exc)
            if _is_refusal(exc):
                raise KafkaAccessError(problem, refused=True) from exc
            problems.append(problem)
            continue
        finally:
            if connection is not None:
                connection.close()
        return
    raise KafkaAccessError(
        "; ".join(problems) or f"no server in {SETTING_NAMES['servers']}", refused=not problems
    )


async def start_client(client: Any, bootstrap_servers: str, security: KafkaSecurity) -> None:
    """Start an aiokafka producer, consumer or admin client; when it cannot reach the broker,
    `KafkaAccessError` says why and names the setting (aiokafka's own error says only that it
    could not bootstrap), else its error as it was."""
    if security.uses_sasl and security.sasl_mechanism == "OAUTHBEARER":
        # A refused token would look like a broker without partitions, waited on for ever.
        await check_broker(bootstrap_servers, security)
    try:
        await client.start()
    except BaseException as exc:
        await (client.close() if isinstance(client, AIOKafkaAdminClient) else client.stop())
        if isinstance(exc, errors.KafkaError):
            await check_broker(bootstrap_servers, security)
        raise


async def wait_for_broker(
    bootstrap_servers: str,
    security: KafkaSecurity,
    *,
    log: logging.Logger,
    timeout: float = 15.0,
    pause: float = 5.0,
) -> None:
    """`check_broker` until a server can be used: a refusal is raised at once (it is the
    configuration's), an unreachable broker is waited out — an outage — saying at every try
    what is wrong, so a wrong protocol never looks like a silent hang."""
    while True:
        try:
            await check_broker(bootstrap_servers, security, timeout=timeout)
            return
        except KafkaAccessError as exc:
            if exc.refused:
                raise
            log.warning("waiting for Kafka: %s (again in %.0f s)", exc, pause)
        await asyncio.sleep(pause)


def _is_refusal(exc: BaseException) -> bool:
    """A broker that answered and refused (credentials, certificate, mechanism): another
    server of the same cluster would refuse alike."""
    return isinstance(
        exc,
        errors.SaslAuthenticationFailed
        | errors.UnsupportedSaslMechanismError
        | errors.IllegalSaslStateError
        | ssl.SSLCertVerificationError,
    )


def _explained(server: str, security: KafkaSecurity, exc: BaseException) -> str:
    """What went wrong connecting to `server`, and which setting to look at."""
    names = SETTING_NAMES
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = exc.verify_message or str(exc)
        if "hostname" in reason.lower() or "ip address mismatch" in reason.lower():
            return (
                f"{server}: its TLS certificate does not name this host ({reason}); connect by "
                f"a name the certificate holds, or set {names['hostname']}=false"
            )
        return (
            f"{server}: its TLS certificate is not trusted ({reason}); set {names['ca']} to "
            "the certificate of the authority that signed it"
        )
    if isinstance(exc, errors.SaslAuthenticationFailed | errors.IllegalSaslStateError):
        what = names["token"] if security.sasl_mechanism == "OAUTHBEARER" else names["credentials"]
        return (
            f"{server} refused the {security.sasl_mechanism} login ({exc}); check {what} "
            f"and {names['mechanism']}"
        )
    if isinstance(exc, errors.UnsupportedSaslMechanismError):
        return f"{server}: {exc}; set {names['mechanism']} to one it enables"
    if isinstance(exc, ssl.SSLError):
        return (
            f"{server}: the TLS handshake failed ({exc.reason or exc}); does this listener speak "
            f"TLS ({names['protocol']}={security.protocol}), and does it want a client "
            f"certificate ({names['certificate']})?"
        )
    if isinstance(exc, ConnectionRefusedError | OSError) and not isinstance(exc, TimeoutError):
        return f"{server}: cannot connect ({exc}); check {names['servers']}"
    certificate = (
        f"; or does the listener want a client certificate ({names['certificate']})?"
        if security.uses_ssl and security.ssl_certfile is None
        else ""
    )
    return (
        f"{server}: no usable Kafka answer ({type(exc).__name__}: {exc}); does "
        f"{names['protocol']}={security.protocol} match the listener (a TLS listener "
        f"drops a plain connection, a plain one cannot answer a TLS handshake){certificate}"
    )
