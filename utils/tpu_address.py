"""One grammar for TPU addresses, shared by runtime detection and by connecting (no framework).

A TPU is named in one of three ways:

- ``"local"``: a TPU VM; the chips are on this host (Colab since 2024, Kaggle, Cloud TPU VMs).
- a gRPC address of a TPU Node (retired: end of life 2025-04-25): ``"host:port"`` (what Colab's
  old ``COLAB_TPU_ADDR`` held) or ``"grpc://host[:port]"``; with the ``grpc://`` scheme a missing
  port means 8470, as TensorFlow's ``TPUClusterResolver`` assumes.
- a Cloud TPU name (``TPU_NAME``): lower-case letters, digits and ``-``.

:func:`parse` returns a :class:`TPUAddress` or raises :class:`TPUAddressError` whose ``problem``
completes a sentence about the value ("... has port 'x', which is not a number"). Both
``utils.runtime.detect`` (which turns the problem into a hint) and ``utils.tf.tpu_connect`` (which
turns it into a connection error) call it, so they accept and refuse the same strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEFAULT_TPU_PORT", "TPUAddress", "TPUAddressError", "parse", "parse_grpc", "show"]

DEFAULT_TPU_PORT = 8470
"""The port of a TPU Node's gRPC server; TensorFlow assumes it when a ``grpc://`` URL has none."""

HOST_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\]")
NAME_RE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_SCHEME = "grpc://"


class TPUAddressError(ValueError):
    """The text is not a TPU address; ``problem`` says why, as the end of a sentence."""

    def __init__(self, value: str, problem: str) -> None:
        self.value, self.problem = value, problem
        super().__init__(f"{show(value)} {problem}")


@dataclass(frozen=True)
class TPUAddress:
    """A parsed TPU address.

    Attributes:
        kind: ``"local"``, ``"grpc"`` (a TPU Node) or ``"name"`` (a Cloud TPU name).
        tpu: the ``tpu=`` argument for ``TPUClusterResolver``: ``"local"``,
            ``"grpc://host:port"`` or the name.
        host: for ``"grpc"``, the host (IPv6 without brackets).
        port: for ``"grpc"``, the port.
    """

    kind: str
    tpu: str
    host: str | None = None
    port: int | None = None


def show(value: str, limit: int = 60) -> str:
    """A value for a message: quoted, escaped, and cut if long."""
    return repr(value if len(value) <= limit else value[:limit] + "...")


def parse_grpc(value: str) -> TPUAddress:
    """``host:port`` or ``grpc://host[:port]`` -> a ``"grpc"`` address.

    Raises:
        TPUAddressError: empty, no port (without ``grpc://``), a port that is not an ASCII
            number from 1 to 65535, or a host that is not a host name or IP address.
    """
    text = value.strip()
    has_scheme = text.lower().startswith(_SCHEME)
    if has_scheme:
        text = text[len(_SCHEME) :]
    if not text:
        raise TPUAddressError(value, "is empty")
    if text.startswith("[") and text.endswith("]"):  # [::1] alone: an IPv6 host without a port
        host, sep, port = text, "", ""
    else:
        host, sep, port = text.rpartition(":")
    if not sep:
        if not has_scheme:
            raise TPUAddressError(value, "has no port")
        host, port = text, str(DEFAULT_TPU_PORT)
    if ":" in host and not host.startswith("["):  # an IPv6 address needs brackets: [::1]:8470
        raise TPUAddressError(value, "is not host:port")
    if not (port.isascii() and port.isdigit()):
        raise TPUAddressError(value, f"has port {show(port)}, which is not a number")
    if not 1 <= int(port) <= 65535:
        raise TPUAddressError(value, f"has port {int(port)}, outside 1-65535")
    if not HOST_RE.fullmatch(host):
        raise TPUAddressError(
            value, f"has host {show(host)}, which is not a host name or IP address"
        )
    return TPUAddress("grpc", f"{_SCHEME}{host}:{int(port)}", host.strip("[]"), int(port))


def parse(value: str) -> TPUAddress:
    """``"local"``, a gRPC address (:func:`parse_grpc`) or a Cloud TPU name.

    Raises:
        TPUAddressError: none of those.
    """
    text = value.strip()
    if text == "local":
        return TPUAddress("local", "local")
    if text.lower().startswith(_SCHEME) or ":" in text:
        return parse_grpc(text)
    if NAME_RE.fullmatch(text):
        return TPUAddress("name", text)
    raise TPUAddressError(
        value,
        "is neither 'local', a gRPC address (grpc://host:port) nor a Cloud TPU name "
        "(lower-case letters, digits and '-')",
    )
