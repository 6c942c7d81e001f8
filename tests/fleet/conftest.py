"""A real Ray cluster on this machine for the fleet tests: a head and a second raylet (two
"nodes"), each offering ``acp_slots``. One cluster per module (Ray's state is per process).
Every test here is marked ``fleet`` so that CI can run them in a pytest process of their own
(``pytest -m 'not fleet'``, then ``pytest tests/fleet``), where Ray's workers, threads and
signal handlers never meet the other tests; run together, they still pass."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Iterator

import procinfo
import pytest

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError:  # each test module skips itself, in one line (tests/fleet/*: importorskip)
    ray = None

SLOTS_PER_NODE = 16


@contextlib.contextmanager
def ray_cluster(env: dict[str, str]) -> Iterator[object]:
    """Two raylets with ``env`` in their environment (Ray reads its options from RAY_*)."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {"acp_slots": SLOTS_PER_NODE},
            "include_dashboard": False,
        },
    )
    try:
        cluster.add_node(num_cpus=1, resources={"acp_slots": SLOTS_PER_NODE})
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        # ray.init() with the raylet subreaper option sets SIGCHLD to SIG_IGN in this process
        # too (from C++: signal.getsignal() still says SIG_DFL), and leaves it so: every child
        # started afterwards would be reaped by the kernel and its exit status lost. Restore it.
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def alive(pid: int) -> bool:
    """Running (a zombie is dead: only its exit status is left)."""
    return procinfo.process_state(pid) not in (None, "Z")


def wait_gone(pids: Iterable[int], within: float = 10.0) -> list[int]:
    """The pids still alive after `within` seconds (checked every 50 ms)."""
    pids = list(pids)
    deadline = time.monotonic() + within
    while True:
        left = [pid for pid in pids if alive(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fleet: needs a Ray cluster; run in a pytest process of its own "
        "(`pytest -m 'not fleet'` for the rest, then `pytest tests/fleet`)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here + os.sep):
            item.add_marker(pytest.mark.fleet)
