"""One Ray task per GPU: the fleet commands' way of running a function on every GPU of a cluster.

Each task holds one GPU (`num_gpus=1`); tasks whose worker died are retried, and the ones that
failed are reported.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

from gpudvfs.errors import InputError
from gpudvfs.hardware.device import Device

#: (done, total, label)
Progress = Callable[[int, int, str], None]


def import_ray() -> ModuleType:
    """``ray``; `InputError` where it is not installed (the ``fleet`` extra)."""
    try:
        import ray
    except ImportError:
        raise InputError("the fleet commands run on Ray: pip install 'gpudvfs[fleet]'") from None
    return ray


@contextlib.contextmanager
def ray_session(ray_address: str = "local", num_gpus: int | None = None) -> Iterator[ModuleType]:
    """Ray, initialised for the block unless it already is (then its cluster is used as it is, and not shut down).

    ``"local"`` starts a cluster on this machine with ``num_gpus`` logical GPUs; any other address
    goes to ``ray.init(address=...)``. `InputError` where Ray is not installed, or no cluster answers.
    """
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    if ray_address == "local":
        ray.init(num_gpus=num_gpus, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    else:
        try:
            ray.init(address=ray_address, logging_level=logging.WARNING)
        except ConnectionError as e:  # Ray's own message names its CLI's --address, which gpudvfs lacks
            raise InputError(f"--ray {ray_address}: no Ray cluster found there ({str(e).split('.')[0]}); start "
                             "one (`ray start --head`) and pass its HOST:PORT, set RAY_ADDRESS and pass 'auto', or "
                             "pass 'local' to start one here") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def per_gpu(fn: Callable[..., dict], devices: Callable[[int], Device], args: Sequence, *, gpus: int | None = None,
            ray_address: str = "local", max_retries: int = 3, progress: Progress | None = None,
            what: str = "tasks", resumable: bool = False) -> list[dict]:
    """Run ``fn(devices, slot, *args)`` for every slot, each a Ray task holding one GPU; the results by slot.

    A task whose worker dies is retried up to ``max_retries`` times; errors are collected and the
    other GPUs go on.

    Parameters
    ----------
    fn : callable
        Returns a dict with the GPU's ``uuid``.
    devices : callable
        ``devices(slot)`` opens the slot's GPU; ``devices.logical_gpus``: they are simulated.
    gpus : int or None
        Slots 0 .. ``gpus``-1 (None: every GPU of the cluster).
    ray_address : str
        ``"local"`` starts a cluster on this machine (with ``gpus`` logical GPUs for simulated
        ones); anything else goes to ``ray.init(address=...)`` (``"auto"``, ``"ray://head:10001"``).
    progress : callable or None
        ``progress(done, total, label)`` as each task ends.
    what, resumable
        What the tasks are, and whether a rerun picks up where they stopped, for the error.

    Raises
    ------
    InputError
        For ``gpus`` below 1, simulated GPUs on a local cluster without ``gpus``, a cluster with
        too few GPUs, or tasks that failed.
    """
    if gpus is not None and gpus < 1:
        raise InputError(f"--gpus must be at least 1, got {gpus}")
    logical = bool(getattr(devices, "logical_gpus", False))
    if logical and gpus is None and ray_address == "local" and not import_ray().is_initialized():
        raise InputError("simulated GPUs on a local Ray cluster: give their number (--gpus)")
    with ray_session(ray_address, gpus if logical else None) as ray:
        have = int(ray.cluster_resources().get("GPU", 0))
        gpus = have if gpus is None else gpus
        if have < 1 or gpus > have:
            raise InputError(f"the Ray cluster has {have} GPUs; {gpus or 'at least one'} needed")
        task = ray.remote(fn).options(num_gpus=1, max_retries=max_retries, retry_exceptions=False)
        pending = {task.remote(devices, slot, *args): slot for slot in range(gpus)}
        results: list[Any] = [None] * gpus
        failures: list[str] = []
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            slot = pending.pop(ready[0])
            try:
                results[slot] = ray.get(ready[0])
                label = results[slot]["uuid"]
            except Exception as e:  # noqa: BLE001 -- reported with its GPU, the others go on
                failures.append(f"GPU slot {slot}: {_cause(e)}")
                label = f"slot {slot} failed"
            if progress:
                progress(gpus - len(pending), gpus, label)
        if failures:
            hint = " (rerun to resume them)" if resumable else ""
            raise InputError(f"{len(failures)} of {gpus} {what} failed{hint}:\n"
                             + "\n".join(failures))
        return results


def _cause(e: BaseException) -> str:
    """A Ray task error's own message, without Ray's traceback framing."""
    cause = getattr(e, "cause", None)
    return str(cause) if cause is not None else str(e).strip().splitlines()[-1]
