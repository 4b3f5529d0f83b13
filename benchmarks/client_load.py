"""A model client that takes a set time to load, for the benchmarks' server processes.

litellm's import is the model client's load: 2.5 s on a quiet machine, 5 to 7 s on a busy
one. To measure what a slow load does to the first turns the same way on every run, a
benchmark starts the server with `sitecustomize_dir(seconds)` on its PYTHONPATH: the load
(`om_mcp.models.litellm_client.load_litellm`) then lasts at least that long, and the client
reports itself warm only at its end, as a slow import would. Nothing in om_mcp changes.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
import time
from pathlib import Path

MODULE = "om_mcp.models.litellm_client"
ENV = "BENCH_CLIENT_LOAD_SECONDS"  # not OM_: the server would read that as an option

SITECUSTOMIZE = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import client_load
client_load.install(float(os.environ.get({ENV!r}) or 0))
"""


def sitecustomize_dir(folder: Path) -> Path:
    """A folder holding the sitecustomize.py that installs the slow load; put it on PYTHONPATH."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return folder


def install(seconds: float) -> None:
    if seconds > 0:
        sys.meta_path.insert(0, _Finder(seconds))


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, seconds: float):
        self.seconds = seconds

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name != MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader, seconds = spec.loader, self.seconds
        exec_module = loader.exec_module

        def exec_slowed(module):  # type: ignore[no-untyped-def]
            exec_module(module)
            _slow_down(module, seconds)

        loader.exec_module = exec_slowed  # type: ignore[method-assign]
        return spec


def _slow_down(module, seconds: float) -> None:  # type: ignore[no-untyped-def]
    original, lock = module.load_litellm, threading.Lock()

    def load_litellm():  # type: ignore[no-untyped-def]
        if module._litellm is not None:
            return module._litellm
        with lock:
            if module._litellm is None:
                started = time.monotonic()
                litellm = original()
                module._litellm = None  # not warm until the whole load is over
                time.sleep(max(0.0, seconds - (time.monotonic() - started)))
                module._litellm = litellm
        return module._litellm

    module.load_litellm = load_litellm
