"""The chaos suite's two profiles and its figures.

- **Fast** (default; what ``scripts/check`` and CI run): fixed seeds, a few kills/jumps
  per scenario, a few minutes in total.
- **Soak**: ``pytest tests/chaos --soak [--soak-minutes=N] [--chaos-seed=N]`` runs each
  scenario for longer with random seeds, printed so a failure can be replayed with
  ``--chaos-seed``. Tests (or parametrised cases) marked ``@pytest.mark.soak`` are
  soak-length: skipped unless ``--soak`` is given.

The options live here, so they exist when pytest is pointed at ``tests/chaos`` (the
directory's conftest is then loaded before the command line is parsed). A plain
``pytest`` run never sees ``--soak``: it gets the fast profile.

Every scenario publishes one line of figures (:func:`tests.chaos.recorder.publish`);
they are repeated together at the end of the run.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

import pytest

from tests.chaos.recorder import FIGURES

SOAK_MARK = "soak: soak-length chaos case, run only with `pytest tests/chaos --soak`"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "Steeple's reliability suite (tests/chaos)")
    group.addoption("--soak", action="store_true", help="run the soak profile (random seeds)")
    group.addoption(
        "--soak-minutes",
        type=float,
        default=5.0,
        help="soak profile: minutes each long-running scenario keeps going (default 5)",
    )
    group.addoption("--chaos-seed", type=int, default=None, help="replay a printed seed")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", SOAK_MARK)


def _option(config: pytest.Config, name: str, default: object) -> object:
    # Unknown when pytest was not pointed at tests/chaos: then it is the fast profile.
    try:
        return config.getoption(name)
    except ValueError:
        return default


def soak_enabled(config: pytest.Config) -> bool:
    return bool(_option(config, "soak", False))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("soak") and not soak_enabled(item.config):
        pytest.skip("soak-length case: run with `pytest tests/chaos --soak`")


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """What one scenario may spend: ``soak`` runs longer, ``minutes`` per long scenario."""

    soak: bool
    seed: int
    minutes: float

    def pick(self, fast: int, soak: int) -> int:
        return soak if self.soak else fast

    def rng(self) -> random.Random:
        return random.Random(self.seed)


@pytest.fixture
def profile(request: pytest.FixtureRequest) -> Profile:
    """The profile and this test's seed: fixed per test in the fast profile (derived from
    its name), random in the soak profile, ``--chaos-seed`` to replay."""
    config = request.config
    soak = soak_enabled(config)
    given = _option(config, "chaos_seed", None)
    if isinstance(given, int):
        seed = given
    elif soak:
        seed = random.SystemRandom().randrange(2**32)
    else:
        seed = zlib.crc32(request.node.name.encode("utf-8"))
    minutes = float(_option(config, "soak_minutes", 5.0))  # type: ignore[arg-type]
    chosen = Profile(soak=soak, seed=seed, minutes=minutes)
    print(
        f"[chaos] {request.node.name}: {'soak' if soak else 'fast'} profile, seed={seed}"
        f" (replay: pytest '{request.node.nodeid}' {'--soak ' if soak else ''}"
        f"--chaos-seed={seed})"
    )
    return chosen


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its figures to the controller, whose summary prints them
    (tests/conftest.py)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["chaos_figures"] = list(FIGURES)
