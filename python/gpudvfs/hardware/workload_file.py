"""User workloads for a sweep, from a JSON file.

```json
{"workloads": [
  {"name": "stencil", "callable": "mypkg.bench:run_stencil", "profile_kernel": "regex:stencil"},
  {"name": "gemm-sim", "counters": {"util:SP": 0.8, "compute_ms": 3.0, "memory_ms": 0.5}}
]}
```
``callable`` names a zero-argument function that launches the work and waits for it (a
real GPU runs it); ``profile_kernel`` names the kernel of the call that Nsight Compute
profiles (``regex:`` allowed; default: the first one launched); ``counters`` describe the
workload to the simulated GPU.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from gpudvfs.data.jsonfile import read_json
from gpudvfs.errors import InputError
from gpudvfs.hardware.device import Workload
from gpudvfs.limits import is_number


def _resolve(spec: str, where: str) -> Callable[[], None]:
    mod, _, attr = spec.partition(":")
    if not mod or not attr:
        raise InputError(f"{where}: callable must look like 'module:function', got {spec!r}")
    try:
        fn = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise InputError(f"{where}: cannot import {spec!r}: {e}") from None
    if not callable(fn):
        raise InputError(f"{where}: {spec!r} is not callable")
    return fn


def read_workloads(path: str | Path) -> list[Workload]:
    """The workloads a JSON file describes (module notes), in its order, each callable imported.

    `InputError` where the file is not such a list, or a callable cannot be imported.
    """
    doc = read_json(path)
    items = doc.get("workloads") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise InputError(f"{path}: expected an object with a non-empty list 'workloads'")
    out = []
    for i, item in enumerate(items):
        where = f"{path}: workloads[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise InputError(f"{where}: expected an object with a non-empty 'name'")
        counters = item.get("counters", {})
        if not isinstance(counters, dict) or not all(is_number(v) for v in counters.values()):
            raise InputError(f"{where}: 'counters' must map names to numbers")
        if "callable" not in item and not counters:
            raise InputError(f"{where}: give 'callable' (real GPU) or 'counters' (simulated GPU)")
        fn = _resolve(item["callable"], where) if "callable" in item else None
        kernel = item.get("profile_kernel")
        if kernel is not None and (not isinstance(kernel, str) or not kernel.strip()):
            raise InputError(f"{where}: 'profile_kernel' must be a non-empty kernel name (or 'regex:...')")
        out.append(Workload(item["name"], fn=fn, counters=counters, spec=item.get("callable"),
                            profile_kernel=kernel))
    return out
