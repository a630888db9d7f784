"""Connect TensorFlow to a TPU, or say exactly why not (imports TensorFlow).

**Importing this module imports TensorFlow.** On a TPU VM, importing TensorFlow (with its TPU
support) claims the TPU chips for this process, and libtpu allows one process at a time. So
import it only in a notebook that trains with TensorFlow, and restart the runtime before a
PyTorch/XLA or JAX notebook. ``utils.runtime`` tells what the machine has without importing it.

- :func:`connect_tpu`: resolve, connect and initialise a TPU, within a time limit, raising one
  exception type, :class:`TPUConnectionError`, whose message says what was tried, why it failed
  and what to do. It knows the real failures: a bare ``TPUClusterResolver()`` on a TPU VM
  (``ValueError: Please provide a TPU Name to connect to.``), plain ``tensorflow`` without TPU
  kernels (``No OpKernel was registered to support Op 'ConfigureDistributedTPU'``), an address
  where nothing answers, and a TPU held by another process.
  A remote address (gRPC or a Cloud TPU name) is first tried in a child process with a time
  limit (:func:`probe_in_child`): an address that accepts TCP but never answers as a TPU then
  costs that child, not this process, which stays usable (a CPU fallback still trains).
- :func:`parse_tpu_address`, :func:`resolve_target`: where to connect, with the grammar of
  :mod:`utils.tpu_address` (the same one runtime detection uses).
- :func:`save_options`, :func:`load_options`, :func:`checkpoint_options`: SavedModel and
  checkpoint options that let a TPU program write to and read from the local disk.

Choosing a ``tf.distribute`` strategy is :mod:`utils.tf.strategies`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from utils import bootstrap, fresh_process, native_logs, tpu_address
from utils import runtime as runtime_mod
from utils.tpu_address import DEFAULT_TPU_PORT

with native_logs.filtered_stderr():  # the oneDNN banner and cuInit line, not errors
    import tensorflow as tf

    tf.config.list_physical_devices()  # device discovery: where the cuInit line is written

# Keep TensorFlow's Python INFO lines (e.g. "Using MirroredStrategy with devices ...") out of
# notebook output; warnings and errors still show.
tf.get_logger().setLevel("ERROR")

__all__ = [
    "DEFAULT_TPU_PORT",
    "INSTALL_TENSORFLOW_TPU",
    "LIBTPU_LOCKFILE",
    "RESTART",
    "TPUConnectionError",
    "TPUTarget",
    "checkpoint_options",
    "check_reachable",
    "connect_tpu",
    "explain_tpu_error",
    "load_options",
    "parse_tpu_address",
    "probe_in_child",
    "resolve_target",
    "save_options",
]

LIBTPU_LOCKFILE = "/tmp/libtpu_lockfile"
"""libtpu creates this file while a process owns the TPU (jax-ml/jax#10192)."""

RESTART = (
    "Restart the runtime (Colab: Runtime > Restart session; Kaggle: Run > Restart & clear cell "
    "outputs; Jupyter: Kernel > Restart), or end the other process"
)

INSTALL_TENSORFLOW_TPU = f"pip install tensorflow-tpu=={bootstrap.TENSORFLOW_TPU_VERSION}"
"""The install command for TensorFlow's TPU build. tensorflow-tpu 2.20 takes libtpu from PyPI
(it requires ``libtpu~=0.0.14``), so no extra index is needed; pip keeps a libtpu the runtime
already has if it fits that range, and whether TensorFlow then finds the chips depends on that
libtpu (Kaggle dropped tensorflow-tpu in Sep 2025: a newer libtpu stopped it finding them)."""

PROBE_IMPORT_ALLOWANCE_S = 120.0
"""Extra seconds a probe child gets for importing TensorFlow (slow on a busy small machine)."""

T = TypeVar("T")


# --------------------------------------------------------------------------- errors


class TPUConnectionError(RuntimeError):
    """Connecting to a TPU failed. The message has three parts: tried, why, fix.

    Attributes:
        tried: what was attempted (resolver arguments, address).
        why: the cause, in plain words, with the original error's key line.
        fix: what to do about it.
    """

    def __init__(self, tried: str, why: str, fix: str, *, process_unusable: bool = False) -> None:
        self.tried, self.why, self.fix = tried, why, fix
        self.process_unusable = process_unusable
        """True when TensorFlow in this process may still be waiting on the TPU: every later
        TensorFlow operation could block, so falling back to the CPU here would hang."""
        super().__init__(
            f"Could not connect to the TPU.\n  Tried: {tried}\n  Why:   {why}\n  Fix:   {fix}"
        )


# --------------------------------------------------------------------------- where to connect


@dataclass(frozen=True)
class TPUTarget:
    """What to hand to ``TPUClusterResolver``.

    Attributes:
        kind: ``"local"`` (TPU VM: the chips are on this host), ``"grpc"`` (TPU Node at an
            address) or ``"name"`` (a Cloud TPU name, looked up through Google Cloud's APIs).
        tpu: the ``tpu=`` argument: ``"local"``, ``"grpc://host:port"`` or the name.
        host: for ``"grpc"``, the host to check before handing the address to TensorFlow.
        port: for ``"grpc"``, the port.
        source: where the target came from, for messages (``"address argument"``...).
    """

    kind: str
    tpu: str
    host: str | None = None
    port: int | None = None
    source: str = "address argument"

    def resolver_call(self) -> str:
        """The resolver call this target stands for, as a learner would type it."""
        return f"TPUClusterResolver(tpu={self.tpu!r})"


_ADDRESS_FORMAT = (
    "Pass address='local' on a TPU VM (Colab, Kaggle, Cloud TPU VM), "
    "'grpc://10.0.0.2:8470' for a TPU Node, or the Cloud TPU's name."
)


def parse_tpu_address(address: str, *, source: str = "address argument") -> TPUTarget:
    """Turn ``"local"``, ``"host:port"``, ``"grpc://host[:port]"`` or a Cloud TPU name into a
    target.

    The grammar is :func:`utils.tpu_address.parse`: a ``grpc://`` URL without a port gets 8470,
    as TensorFlow does.

    Raises:
        TPUConnectionError: the text is none of those (empty, bad port, stray characters).
    """
    try:
        parsed = tpu_address.parse(address)
    except tpu_address.TPUAddressError as exc:
        raise TPUConnectionError(
            f"{source} {address!r}", f"it {exc.problem}.", _ADDRESS_FORMAT
        ) from None
    return TPUTarget(parsed.kind, parsed.tpu, parsed.host, parsed.port, source)


def resolve_target(
    address: str | None = None, *, runtime: runtime_mod.Runtime | None = None
) -> TPUTarget:
    """Decide what to connect to: an explicit ``address`` wins, else what ``runtime`` found.

    TPU VM -> ``"local"``; TPU Node -> its ``grpc://`` address (from ``COLAB_TPU_ADDR`` or a
    ``TPU_NAME`` URL) or its Cloud TPU name (``TPU_NAME``). Nothing is opened here.

    Raises:
        TPUConnectionError: no address and no TPU found.
    """
    if address is not None:
        return parse_tpu_address(address)
    rt = runtime_mod.detect() if runtime is None else runtime
    tpu = rt.tpu
    if tpu is not None and tpu.mode == "vm":
        return TPUTarget("local", "local", source="TPU VM detected")
    if tpu is not None and tpu.address:
        return parse_tpu_address(tpu.address, source="TPU Node address (COLAB_TPU_ADDR/TPU_NAME)")
    if tpu is not None and tpu.name:
        return parse_tpu_address(tpu.name, source="Cloud TPU name (TPU_NAME)")
    raise TPUConnectionError(
        "to find a TPU in this runtime (TPU_ACCELERATOR_TYPE, /dev/accel*, Google TPU PCI "
        "devices, COLAB_TPU_ADDR, TPU_NAME)",
        "there is none: this runtime has no TPU. A bare TPUClusterResolver() would say "
        "'ValueError: Please provide a TPU Name to connect to.' here.",
        "On Colab choose Runtime > Change runtime type > TPU (v5e-1); on Kaggle Settings > "
        "Accelerator > TPU VM v5e-8; elsewhere pass a Cloud TPU name (with its zone and "
        "project), or address='grpc://host:8470' for a legacy TPU Node. To run on this "
        "machine's CPU instead, call get_strategy() without a TPU.",
    )


def check_reachable(host: str, port: int, timeout_s: float) -> float:
    """Open (and close) a TCP connection to ``host:port`` within ``timeout_s``; return seconds.

    Handed to TensorFlow, an address where nothing answers leaves the waiting to gRPC's own
    retry policy, so :func:`connect_tpu` calls this first and gives up within ``timeout_s``
    with a clear message.

    Raises:
        TPUConnectionError: refused, no answer within ``timeout_s``, or the host is unknown.
    """
    start = time.monotonic()
    tried = f"a TCP connection to {host}:{port} (the TPU's gRPC port), limit {timeout_s:.1f} s"
    fix = (
        "Check the address: COLAB_TPU_ADDR and TPU Nodes belong to the old Colab runtime, "
        "which Colab retired (googlecolab/colabtools#4481); today's Colab TPU is a TPU VM: "
        "use address='local' there. TPU Nodes reached end of life on 2025-04-25: on a Cloud "
        "TPU VM the TPU is local, so connect with tpu='local' on the VM itself."
    )
    try:
        with socket.create_connection((host, port), timeout=max(timeout_s, 0.001)):
            pass
    except ConnectionRefusedError:
        took = time.monotonic() - start
        why = f"nothing is listening there: the connection was refused after {took:.1f} s."
        raise TPUConnectionError(tried, why, fix) from None
    except TimeoutError:  # socket.timeout
        why = f"nothing answered within {timeout_s:.1f} s."
        raise TPUConnectionError(tried, why, fix) from None
    except socket.gaierror as exc:
        raise TPUConnectionError(tried, f"the host name is unknown ({exc}).", fix) from None
    except OSError as exc:
        raise TPUConnectionError(tried, f"the network said: {exc}.", fix) from None
    return time.monotonic() - start


# --------------------------------------------------------------------------- explaining errors


def _lockfile_exists() -> bool:
    return os.path.exists(LIBTPU_LOCKFILE)


def _key_line(exc: BaseException) -> str:
    """The first informative line of an exception, shortened."""
    for line in str(exc).splitlines():
        line = line.strip()
        if line:
            return f"{type(exc).__name__}: {line[:300]}"
    return type(exc).__name__


_BUSY_PATTERNS = (
    "already in use",
    "libtpu_lockfile",
    "device or resource busy",
    "unable to initialize backend",
    "not attempting to load libtpu",
)


_BUSY_FIX = (
    f"One process owns the TPU. {RESTART} (find it with `sudo lsof -w /dev/accel* "
    f"/dev/vfio/*` or `fuser {LIBTPU_LOCKFILE}`). A lock file left by a crashed process "
    "can be deleted once no process holds the TPU. Do not mix TensorFlow, PyTorch/XLA and "
    "JAX in one runtime: restart between their notebooks."
)


def _no_tpu_kernels(
    tried: str, key: str, tensorflow_tpu_version: str | None, lockfile_exists: bool
) -> TPUConnectionError:
    """TensorFlow found no TPU kernels or no TPU: which of the three reasons, and the fix."""
    if not tensorflow_tpu_version:
        return TPUConnectionError(
            tried,
            f"{key} This TensorFlow ({tf.__version__}) was built without TPU kernels: plain "
            "`tensorflow` cannot drive a TPU, and Colab's TPU runtimes stopped preinstalling "
            "TensorFlow in March 2025 (googlecolab/colabtools#5164).",
            f"Install the TPU build: `{INSTALL_TENSORFLOW_TPU}` (TensorFlow "
            f"{bootstrap.TENSORFLOW_TPU_VERSION}: tensorflow-tpu trails tensorflow on PyPI; "
            "it takes libtpu from PyPI, libtpu~=0.0.14, and keeps the runtime's libtpu if "
            "that fits), then restart the runtime. On a free TPU, Keras 3 with JAX needs no "
            "install at all (notebook 02).",
        )
    if lockfile_exists:
        return TPUConnectionError(
            tried,
            f"{key} tensorflow-tpu {tensorflow_tpu_version} is installed, but the TPU "
            f"kernels did not load and {LIBTPU_LOCKFILE} exists: another process likely "
            "holds the TPU.",
            _BUSY_FIX,
        )
    return TPUConnectionError(
        tried,
        f"{key} tensorflow-tpu {tensorflow_tpu_version} is installed but found no TPU: "
        "libtpu did not load, or this host has no TPU chips.",
        "Check that `ls /dev/accel* /dev/vfio` shows the chips (v5e and later chips are "
        "/dev/vfio/N); make tensorflow and tensorflow-tpu the same version (pip list | grep "
        "-i -e tensorflow -e libtpu): a libtpu newer than the one tensorflow-tpu was built "
        "with may not find the chips; then restart the runtime.",
    )


def explain_tpu_error(
    exc: BaseException,
    *,
    tried: str,
    tensorflow_tpu_version: str | None = None,
    lockfile_exists: bool | None = None,
) -> TPUConnectionError:
    """Map an exception from resolving, connecting or initialising a TPU to a clear error.

    Args:
        exc: what TensorFlow (or the resolver) raised.
        tried: what was being attempted, for the message.
        tensorflow_tpu_version: the installed ``tensorflow-tpu`` version (default: read from
            package metadata). It decides the advice for a missing ``ConfigureDistributedTPU``.
        lockfile_exists: whether libtpu's lock file exists (default: look at
            ``LIBTPU_LOCKFILE``). A TPU held by another process shows up this way.
    """
    if tensorflow_tpu_version is None:
        tensorflow_tpu_version = bootstrap.installed_version("tensorflow-tpu")
    if lockfile_exists is None:
        lockfile_exists = _lockfile_exists()
    text = str(exc)
    low = text.lower()
    key = _key_line(exc)

    if isinstance(exc, ValueError) and "please provide a tpu name" in low:
        return TPUConnectionError(
            tried,
            f"{key} A resolver without tpu= only reads TPU_NAME, TPU_CONFIG and "
            "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS, which TPU VMs (today's Colab, Kaggle) do not set.",
            "On a TPU VM pass tpu='local' (connect_tpu() does this when it detects one); for a "
            "TPU Node pass tpu='grpc://host:8470' or set TPU_NAME. Never fall back to the CPU "
            "silently on this error: you would train on the CPU without noticing.",
        )
    if any(p in low for p in _BUSY_PATTERNS):
        return TPUConnectionError(tried, f"another process holds the TPU ({key}).", _BUSY_FIX)
    if "configuredistributedtpu" in low or "tpus not found in the cluster" in low:
        return _no_tpu_kernels(tried, key, tensorflow_tpu_version, lockfile_exists)
    if "is neither a type of a primitive operation" in low:
        return TPUConnectionError(
            tried,
            f"{key} The TPU Node runs a different TensorFlow version than this process "
            "(tensorflow/tensorflow#35700).",
            "TPU Nodes need the client and the node on the same TensorFlow version; the TPU Node "
            "architecture reached end of life on 2025-04-25, so use a TPU VM (tpu='local').",
        )
    if isinstance(exc, tf.errors.UnavailableError | tf.errors.DeadlineExceededError) or (
        "failed to connect to all addresses" in low or "socket closed" in low
    ):
        return TPUConnectionError(
            tried,
            f"the address answered, but not as a TPU gRPC server ({key}).",
            "Check that the address is a TPU's gRPC port (8470); on a TPU VM use tpu='local' "
            "(TPU Nodes, which served gRPC, reached end of life on 2025-04-25); restart the "
            "runtime before trying again.",
        )
    if isinstance(exc, ImportError) or "googleapiclient" in low or "oauth2client" in low:
        return TPUConnectionError(
            tried,
            f"looking up a TPU by name needs Google's API client ({key}).",
            "Pass the TPU's gRPC address instead (grpc://IP:8470, from `gcloud compute tpus "
            "describe NAME --zone=$TPU_ZONE`), or `pip install google-api-python-client`.",
        )
    if "metadata" in low or "urlopen" in low or "name or service not known" in low:
        return TPUConnectionError(
            tried,
            f"looking up a TPU by name asks the Google Compute Engine metadata server, which "
            f"this machine cannot reach ({key}).",
            "Outside Google Cloud pass the TPU's gRPC address (grpc://IP:8470); on a GCE VM "
            "set TPU_ZONE and TPU_PROJECT (or pass zone= and project=).",
        )
    return TPUConnectionError(
        tried,
        key,
        "See the troubleshooting table in notebooks/01_getting_onto_a_tpu.ipynb; restart the "
        "runtime before trying again.",
    )


# --------------------------------------------------------------------------- connecting


def _call_with_deadline(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    """Run ``fn`` in a daemon thread; raise ``TimeoutError`` if it takes over ``timeout_s``.

    The thread cannot be stopped: after a timeout it may still be waiting in TensorFlow, which
    is why :func:`connect_tpu` tries remote addresses in a child process first.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"tpu_connect: {what}", daemon=True)
    thread.start()
    thread.join(max(timeout_s, 0.0))
    if thread.is_alive():
        raise TimeoutError(f"{what} did not finish within {timeout_s:.1f} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _make_resolver(target: TPUTarget) -> tf.distribute.cluster_resolver.TPUClusterResolver:
    if target.kind == "name":
        return tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=target.tpu,
            zone=os.environ.get("TPU_ZONE") or None,
            project=os.environ.get("TPU_PROJECT") or None,
        )
    return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=target.tpu)


def _connect_and_init(resolver: tf.distribute.cluster_resolver.TPUClusterResolver) -> None:
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)


_PROBE_RESULT = "TPU_PROBE_RESULT "


def _probe_main(tpu: str, timeout_s: float) -> None:
    """The child side of :func:`probe_in_child`: connect, print one result line, exit at once.

    ``os._exit`` ends the child even while a TensorFlow thread is still waiting on the address.
    """
    result: dict[str, Any]
    try:
        target = parse_tpu_address(tpu)
        resolver = _call_with_deadline(lambda: _make_resolver(target), timeout_s, "resolving")
        _call_with_deadline(lambda: _connect_and_init(resolver), timeout_s, "connecting")
        result = {"ok": True}
    except TimeoutError as exc:
        result = {"ok": False, "timeout": True, "message": str(exc)}
    except BaseException as exc:
        result = {"ok": False, "type": type(exc).__name__, "message": str(exc)[:4000]}
    sys.stdout.write(_PROBE_RESULT + json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)


def _rebuild_error(kind: str, message: str) -> BaseException:
    """An exception like the child's, for :func:`explain_tpu_error` to classify."""
    error_class = getattr(tf.errors, kind, None)
    if isinstance(error_class, type) and issubclass(error_class, tf.errors.OpError):
        return error_class(None, None, message)
    builtin = {"ValueError": ValueError, "ImportError": ImportError, "RuntimeError": RuntimeError}
    return builtin.get(kind, RuntimeError)(message)


def probe_in_child(target: TPUTarget, timeout_s: float, *, tried: str) -> float:
    """Try resolving, connecting and initialising ``target`` in a child Python process.

    TensorFlow cannot abandon a connection attempt: once a process has waited on an address that
    accepts TCP but never answers as a TPU, its later TensorFlow operations block too. A child
    takes that risk instead. It gets ``timeout_s`` for the TPU steps (plus
    :data:`PROBE_IMPORT_ALLOWANCE_S` to import TensorFlow) and is killed after that; no process
    is left behind. Returns the seconds the probe took.

    Raises:
        TPUConnectionError: the child timed out or failed (mapped by :func:`explain_tpu_error`);
            this process is unharmed (``process_unusable`` is False).
    """
    code = (
        "import sys\nfrom utils.tf import tpu_connect\n"
        "tpu_connect._probe_main(sys.argv[1], float(sys.argv[2]))\n"
    )
    limit = timeout_s + PROBE_IMPORT_ALLOWANCE_S
    child = fresh_process.run_child(
        [sys.executable, "-c", code, target.tpu, repr(max(timeout_s, 0.001))],
        env=fresh_process.child_env({"TF_CPP_MIN_LOG_LEVEL": "3"}),
        timeout_s=limit,
        stderr=subprocess.DEVNULL,
    )
    out, took = child.stdout, child.seconds
    lines = [line for line in (out or "").splitlines() if line.startswith(_PROBE_RESULT)]
    if not lines:
        raise TPUConnectionError(
            tried,
            f"a test connection in a separate process gave no answer within {limit:.0f} s "
            f"(exit status {child.returncode}, timed out: {child.timed_out}).",
            "Check the TPU is READY and reachable; this runtime was not touched, so it is "
            "still usable.",
        )
    result = json.loads(lines[-1][len(_PROBE_RESULT) :])
    if result["ok"]:
        return took
    if result.get("timeout"):
        raise TPUConnectionError(
            tried,
            f"{result['message']} in a separate test process: the address accepts connections "
            "but did not answer as a TPU.",
            "Check that the address is the TPU's (port 8470) and that the TPU is READY "
            "(gcloud compute tpus tpu-vm list, or queued-resources list); raise timeout_s if it "
            "is only slow. This runtime was not touched: a CPU fallback still works.",
        )
    raise explain_tpu_error(_rebuild_error(result["type"], result["message"]), tried=tried)


def connect_tpu(
    address: str | None = None,
    *,
    timeout_s: float = 60.0,
    runtime: runtime_mod.Runtime | None = None,
    probe: bool = True,
) -> tf.distribute.cluster_resolver.TPUClusterResolver:
    """Resolve, connect to and initialise a TPU; return the resolver for ``TPUStrategy``.

    The three steps of every TPU program in TensorFlow 2, with today's arguments:

    1. ``TPUClusterResolver(tpu=...)``: ``'local'`` on a TPU VM (the notebook runs on the TPU's
       host: Colab since 2024, Kaggle, Cloud TPU VMs); ``'grpc://host:8470'`` for a TPU Node
       (the legacy remote TPU, ``COLAB_TPU_ADDR``; end of life 2025-04-25); or a Cloud TPU name
       (``TPU_NAME``, with ``TPU_ZONE`` and ``TPU_PROJECT`` when set).
    2. ``tf.config.experimental_connect_to_cluster``: for a remote TPU, makes its devices visible
       to this process (nothing to do for ``'local'``).
    3. ``tf.tpu.experimental.initialize_tpu_system``: resets the TPU and loads TensorFlow's TPU
       runtime. It wipes the TPU's memory, so call it once per process (``get_strategy``
       caches its result).

    Args:
        address: ``'local'``, ``'grpc://host:port'``, ``'host:port'`` or a Cloud TPU name;
            default: what :func:`utils.runtime.detect` found.
        timeout_s: the limit for the TPU steps. A gRPC address is first checked with a plain
            TCP connection; then (with ``probe``) a child process tries the three steps
            (:func:`probe_in_child`; importing TensorFlow there gets extra time), and only
            if it succeeds does this process connect, under a watchdog thread. The local TPU
            VM path runs in this thread (libtpu fails fast when the chips are busy).
        runtime: a :class:`utils.runtime.Runtime` (default: ``detect()``); tests pass fakes.
        probe: try remote targets in a child process first (default). Without it a remote
            address that never answers leaves this process's TensorFlow waiting.

    Raises:
        TPUConnectionError: with what was tried, why it failed and what to do. Its
            ``process_unusable`` is True only when TensorFlow in this process may still be
            waiting (a timeout here, after a successful probe, or with ``probe=False``).
    """
    deadline = time.monotonic() + timeout_s

    def left() -> float:
        return max(deadline - time.monotonic(), 0.0)

    target = resolve_target(address, runtime=runtime)
    tried = f"{target.resolver_call()} ({target.source}), limit {timeout_s:.1f} s"

    if target.kind == "grpc":
        assert target.host is not None and target.port is not None
        check_reachable(target.host, target.port, left())
    if target.kind != "local" and probe:
        probe_in_child(target, left(), tried=tried)
        deadline = time.monotonic() + timeout_s  # the probe's TensorFlow import is not counted

    try:
        if target.kind == "local":
            resolver = _make_resolver(target)
            _connect_and_init(resolver)
        else:
            resolver = _call_with_deadline(lambda: _make_resolver(target), left(), "resolving")
            _call_with_deadline(lambda: _connect_and_init(resolver), left(), "connecting")
    except TimeoutError as exc:
        raise TPUConnectionError(
            tried,
            f"{exc}: the TPU did not answer in time, and TensorFlow in this process may still "
            "be waiting for it (every later TensorFlow operation could block).",
            "Restart the runtime (Colab: Runtime > Restart session; Jupyter: Kernel > Restart) "
            "before any other TensorFlow work; check the TPU is READY and raise timeout_s if it "
            "is only slow.",
            process_unusable=True,
        ) from None
    except TPUConnectionError:
        raise
    except Exception as exc:
        raise explain_tpu_error(exc, tried=tried) from exc
    return resolver


# --------------------------------------------------------------------------- saving on a TPU


def save_options() -> tf.saved_model.SaveOptions:
    """``tf.saved_model.save`` / ``model.export`` options that write through this host.

    A TPU program's variables live on the TPU; saving a SavedModel to a local path from a TPU
    worker needs the host (``/job:localhost``) as the I/O device. Keras 3's ``model.save(
    'x.keras')`` and ``save_weights`` copy values to the host themselves and need no options.
    """
    return tf.saved_model.SaveOptions(experimental_io_device="/job:localhost")


def load_options() -> tf.saved_model.LoadOptions:
    """``tf.saved_model.load`` options that read through this host (see :func:`save_options`)."""
    return tf.saved_model.LoadOptions(experimental_io_device="/job:localhost")


def checkpoint_options() -> tf.train.CheckpointOptions:
    """``tf.train.Checkpoint.write/read`` options that use this host for I/O on a TPU."""
    return tf.train.CheckpointOptions(experimental_io_device="/job:localhost")
