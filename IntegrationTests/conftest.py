"""Fixtures for the tests that run against the local stack.

- `stack` (session): one `Scripts/devstack up` with a fresh state directory
  and free loopback ports, so parallel runs and other stacks never collide;
  `down` at the end.
- `stack_factory` (session): `stack_factory(access_token_ttl=5, …)` starts
  another stack with custom durations (cached per option set; all stopped at
  the end).
- the helpers the tests call (`sign_in`, `api`, `rest`, `db`, `paired_session`,
  …) live in castkit.devstack: this file holds fixtures and hooks only.
- a per-test time limit (ini `default_timeout`, marker `timeout(N)`),
  enforced here with SIGALRM, since pytest-timeout is not part of the
  pinned environment.
"""
from __future__ import annotations

import concurrent.futures
import os
import signal

import pytest

try:
    from castkit.devstack import Stack, devstack_down, devstack_up
except ModuleNotFoundError as e:      # the venv puts castkit on sys.path (castd-paths.pth)
    raise ImportError(f"{e}: run Scripts/bootstrap, which makes the project's packages importable "
                      "from .venv (docs/testing.md, 'Python layout')") from e


# ---------------------------------------------------------------- time limit

def pytest_addoption(parser):
    parser.addini("default_timeout", "seconds per test (0: none)", default="60")


class TestTimeout(Exception):
    pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    marker = item.get_closest_marker("timeout")
    seconds = int(marker.args[0]) if marker else int(item.config.getini("default_timeout") or 0)

    def expire(_sig, _frame):
        raise TestTimeout(f"{item.nodeid} exceeded its {seconds} s limit")

    old = None
    if seconds > 0:
        old = signal.signal(signal.SIGALRM, expire)
        signal.alarm(seconds)
    try:
        yield
    finally:
        if seconds > 0:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------- long rows

def pytest_collection_modifyitems(config, items):
    """Tests marked `long` run only with CASTD_LONG=1 (the full fault set's row
    'long integration rows'); CI runs each capability's quick row."""
    if os.environ.get("CASTD_LONG") == "1":
        return
    skip = pytest.mark.skip(reason="long row: the full fault set runs it (CASTD_LONG=1)")
    for item in items:
        if item.get_closest_marker("long"):
            item.add_marker(skip)


# ---------------------------------------------------------------- stacks

@pytest.fixture(scope="session")
def stack():
    s = devstack_up()
    yield s
    devstack_down(s.state_dir)


@pytest.fixture(scope="session")
def stack_factory():
    started: dict[tuple, Stack] = {}

    def make(**options) -> Stack:
        key = tuple(sorted(options.items()))
        if key not in started:
            started[key] = devstack_up(**options)
        return started[key]

    yield make
    with concurrent.futures.ThreadPoolExecutor(max(1, len(started))) as ex:
        list(ex.map(lambda s: devstack_down(s.state_dir), started.values()))
