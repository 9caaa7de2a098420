"""The record every bench script stores beside its results: date, machine, versions, load average, time.

One helper for the bench scripts of chapters 8-10 (positions_extrapolation, rope_scaling, long_context,
kv_heads_quality, latent_quality):

    info = RunInfo("python bench/long_context.py")   # at the start: the time and the load before
    ...; info.sample()                               # after each part: the load now
    meta = info.metadata(settings=..., seconds=...)  # date, machine, versions, load (before, after, min/max)
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import time

from attention_cost import machine

PACKAGES = ("jax", "jaxlib", "equinox", "optax", "numpy")
NOTE = "the machine was shared with other processes; timings are inflated by the load, losses are not"


class RunInfo:
    """The start time and the load average of one bench run, and the metadata that describes it."""

    def __init__(self, command: str | None = None):
        self.command = command
        self.start = time.time()
        self.load_before = round(os.getloadavg()[0], 2)
        self.loads: list[float] = []

    def sample(self) -> float:
        """Record the 1-minute load average now (after one part of the run) and return it."""
        self.loads.append(round(os.getloadavg()[0], 2))
        return self.loads[-1]

    def metadata(self, *, samples_name: str = "after_each_part", **extra) -> dict:
        """``date``, ``machine``, ``versions``, ``load_average_1min``, ``note``, ``command`` (if given), then
        ``extra``, then ``total_seconds``: the keys of the bench JSON files of chapters 8-10."""
        load = dict(before=self.load_before, after=round(os.getloadavg()[0], 2))
        if self.loads:
            load[samples_name] = dict(min=min(self.loads), max=max(self.loads))
        meta = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    machine=machine(), versions={p: importlib.metadata.version(p) for p in PACKAGES},
                    load_average_1min=load, note=NOTE)
        if self.command:
            meta["command"] = self.command
        meta.update(extra)
        meta["total_seconds"] = round(time.time() - self.start, 1)
        return meta
