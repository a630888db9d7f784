"""``TF_CONFIG`` for a multi-worker TensorFlow rehearsal on 127.0.0.1, built and checked early.

TensorFlow's own errors for a bad ``TF_CONFIG`` come late (a hang waiting for a worker that does
not exist, or a ``KeyError`` deep in a cluster resolver); :func:`parse_tf_config` names the field
first. Framework-free: a worker checks its ``TF_CONFIG`` before importing TensorFlow.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from utils.launcher import LOOPBACK, LaunchError, check_loopback

__all__ = ["parse_tf_config", "tf_config"]


def tf_config(ports: Sequence[int], index: int, host: str = LOOPBACK) -> str:
    """The ``TF_CONFIG`` JSON for worker ``index`` of a cluster of workers on ``host:ports``."""
    check_loopback(host)
    cfg = {
        "cluster": {"worker": [f"{host}:{int(p)}" for p in ports]},
        "task": {"type": "worker", "index": int(index)},
    }
    parse_tf_config(json.dumps(cfg))
    return json.dumps(cfg)


def parse_tf_config(text: str | None) -> dict[str, Any]:
    """Check a ``TF_CONFIG`` string before TensorFlow reads it; return it parsed.

    TensorFlow's own errors for a bad ``TF_CONFIG`` come late (a hang waiting for a worker that
    does not exist, or a ``KeyError`` deep in a cluster resolver). This names the field:
    ``cluster.worker``, ``task.type``, ``task.index``; it also keeps the rehearsal on 127.0.0.1.
    """
    if not text:
        raise LaunchError("TF_CONFIG is not set or empty: each worker needs its own TF_CONFIG")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LaunchError(f"TF_CONFIG is not valid JSON ({exc}): {text[:120]!r}") from exc
    if not isinstance(cfg, dict):
        raise LaunchError(f"TF_CONFIG must be a JSON object, got {type(cfg).__name__}")
    cluster, task = cfg.get("cluster"), cfg.get("task")
    if not isinstance(cluster, dict) or not cluster:
        raise LaunchError('TF_CONFIG field "cluster" is missing or empty: {"worker": [...]}')
    workers = cluster.get("worker")
    if not isinstance(workers, list) or not workers:
        raise LaunchError('TF_CONFIG field "cluster.worker" must be a non-empty list of host:port')
    for i, address in enumerate(workers):
        host, sep, port = str(address).rpartition(":")
        if not sep or not port.isdigit():
            raise LaunchError(
                f'TF_CONFIG field "cluster.worker[{i}]" is {address!r}, not host:port'
            )
        try:
            check_loopback(host)
        except ValueError as exc:
            raise LaunchError(f'TF_CONFIG field "cluster.worker[{i}]": {exc}') from exc
    if len(set(workers)) != len(workers):
        raise LaunchError(f'TF_CONFIG field "cluster.worker" lists an address twice: {workers}')
    if not isinstance(task, dict):
        raise LaunchError('TF_CONFIG field "task" is missing: {"type": "worker", "index": N}')
    if task.get("type") not in cluster:
        raise LaunchError(
            f'TF_CONFIG field "task.type" is {task.get("type")!r}; '
            f"the cluster has {sorted(cluster)}"
        )
    index = task.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(workers):
        raise LaunchError(
            f'TF_CONFIG field "task.index" is {index!r}; it must be an int in '
            f"0..{len(workers) - 1} (cluster.worker has {len(workers)} entries)"
        )
    return cfg
