"""The metrics server's TLS: a certificate folder re-read when it changes, or self-signed.

Rotated certificates (cert-manager, Secret updates) are picked up without a restart; a
half-written rotation keeps the previous certificate.
"""

from __future__ import annotations

import ssl
import tempfile
from pathlib import Path

import structlog

from lifecycle_controller.machinery.clock import Clock, RealClock

__all__ = ["ReloadingTls"]

_log = structlog.get_logger(__name__)


def _server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    context.load_cert_chain(cert_file, key_file)
    return context


def _file_signature(*paths: Path) -> tuple[tuple[int, int, int], ...]:
    signature = []
    for path in paths:
        stat = path.stat()
        signature.append((stat.st_mtime_ns, stat.st_ino, stat.st_size))
    return tuple(signature)


class ReloadingTls:
    """The metrics server's TLS: a certificate directory re-read on change, or self-signed.

    The context given to the listener swaps in the current one during each handshake (the
    SNI callback runs for every ClientHello, with or without SNI). With a directory, at most
    once per ``check_interval`` seconds a handshake compares the files' mtime, inode and size
    with what was loaded; if they changed, a new context is built, and swapped in only if
    the pair loads (a half-written rotation keeps the old certificate).
    """

    def __init__(
        self,
        *,
        cert_dir: str | None = None,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
        clock: Clock | None = None,
        check_interval: float = 1.0,
    ) -> None:
        self._clock: Clock = clock if clock is not None else RealClock()
        self._interval = check_interval
        self._files: tuple[Path, Path] | None = None
        if cert_dir:
            self._files = (Path(cert_dir) / cert_name, Path(cert_dir) / key_name)
            self._signature = _file_signature(*self._files)
            self._current = _server_context(*self._files)
        else:
            self._signature = ()
            self._current = self._self_signed()
        self._checked_at = self._clock.monotonic()
        self.reloads = 0
        self.context = self._current
        self.context.sni_callback = self._on_hello

    @staticmethod
    def _self_signed() -> ssl.SSLContext:
        # Imported here: cryptography costs about 10 MB and 40 ms, and only a secure metrics
        # server without a certificate folder needs it (docs/architecture.md#raw-requests).
        from lifecycle_controller.machinery.tls import self_signed_certificate

        cert_pem, key_pem = self_signed_certificate()
        with tempfile.TemporaryDirectory(prefix="lifecycle-metrics-tls-") as tmp:
            cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_file.write_bytes(cert_pem)
            key_file.touch(mode=0o600)
            key_file.write_bytes(key_pem)
            return _server_context(cert_file, key_file)

    def maybe_reload(self) -> None:
        """Re-read the certificate files if they changed since the last load."""
        if self._files is None:
            return
        try:
            signature = _file_signature(*self._files)
            if signature == self._signature:
                return
            context = _server_context(*self._files)
        except (OSError, ssl.SSLError) as error:
            _log.warning("metrics certificate not reloaded", error=str(error))
            return
        self._current = context
        self._signature = signature
        self.reloads += 1
        _log.info("metrics certificate reloaded", cert=str(self._files[0]))

    def _on_hello(
        self, connection: ssl.SSLObject | ssl.SSLSocket, _server_name: str | None, _ctx: object
    ) -> None:
        now = self._clock.monotonic()
        if now - self._checked_at >= self._interval:
            self._checked_at = now
            self.maybe_reload()
        if connection.context is not self._current:
            connection.context = self._current
