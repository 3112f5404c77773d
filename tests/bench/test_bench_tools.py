"""The tools around the benchmarks: ``bench.ab`` interleaves arms (trees) and reads each
run's result file back, ``bench.fixed_clock`` makes every arm plan the same minute from
its own tree, ``bench.pyspy`` folds py-spy's raw stacks into shares. Counts and names
are asserted, never a time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import ab, pyspy

ROOT = Path(__file__).parent.parent.parent
T0_MS = 1796164890000  # a whole second: the minute every arm plans


def test_arms_rotate_one_place_per_round() -> None:
    arms = [ab.Arm(name, Path(name)) for name in ("base", "merge", "ids")]
    orders = [[a.name for a in ab.order(arms, r)] for r in range(4)]
    assert orders == [
        ["base", "merge", "ids"],
        ["merge", "ids", "base"],
        ["ids", "base", "merge"],
        ["base", "merge", "ids"],
    ]


def test_an_arm_is_a_name_and_a_tree() -> None:
    assert ab.parse_arm("base=/tmp/base") == ab.Arm("base", Path("/tmp/base"))
    with pytest.raises(Exception, match="NAME=DIR"):
        ab.parse_arm("/tmp/base")


def test_the_last_wrote_line_names_the_result() -> None:
    output = "planner …\nwrote /tmp/a/planner-1.json\nwrote /tmp/a/planner-2.json\n"
    assert ab.written(output) == Path("/tmp/a/planner-2.json")
    with pytest.raises(RuntimeError, match="no result file"):
        ab.written("nothing here\n")


def test_every_run_of_every_group_is_read_back_numbers_only() -> None:
    document = {
        "runs": {
            "burst 10": [{"cpu_s": 1, "lost": 0, "note": "x"}, {"cpu_s": 2.5, "lost": 0}],
            "burst 20": [{"cpu_s": 3, "lost": 1}],
        }
    }
    assert ab.figures_of(document, []) == [
        {"cpu_s": 1.0, "lost": 0.0},
        {"cpu_s": 2.5, "lost": 0.0},
        {"cpu_s": 3.0, "lost": 1.0},
    ]
    assert ab.figures_of(document, ["lost"]) == [{"lost": 0.0}, {"lost": 0.0}, {"lost": 1.0}]


def _tree(into: Path) -> Path:
    """A copy of this tree's ``appliance`` and ``bench`` (an arm as a ``git archive`` is)."""
    skip = shutil.ignore_patterns("__pycache__", "results", "recorded")
    for package in ("appliance", "bench"):
        shutil.copytree(ROOT / package, into / package, ignore=skip)
    return into


@pytest.mark.slow
def test_two_arms_plan_the_same_minute_each_from_its_own_tree(tmp_path: Path) -> None:
    arms = [ab.Arm("one", _tree(tmp_path / "one")), ab.Arm("two", _tree(tmp_path / "two"))]
    command = ["bench.fixed_clock", str(T0_MS), "--sizes", "200", "--runs", "1"]
    runs = ab.interleave(arms, command, rounds=1, keep=["occurrences"], into=tmp_path / "kept")
    assert runs["one"] == runs["two"] and runs["one"][0]["occurrences"] > 0
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["one-r1.json", "two-r1.json"]
    for arm in arms:  # each arm's planner ran from its copy and wrote its result there
        assert len(list((arm.tree / "bench" / "results").glob("planner-*.json"))) == 1


def test_a_failing_arm_names_itself(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise SystemExit(3)\n")
    with pytest.raises(RuntimeError, match="broken_arm: exit 3"):
        ab.invoke(ab.Arm("broken_arm", tmp_path), ["broken"])


RAW = """\
thread (1): MainThread;_run (t/_run.py:10);deliver (e/dispatcher.py:5);frame_post (e/request.py:7) 6
thread (1): MainThread;_run (trio/_run.py:10);deliver (e/dispatcher.py:9) 2
thread (1): MainThread;_run (trio/_run.py:12) 2
thread (2): run_group from appliance;_work (trio/_cache.py:3);complete_runs (s/completions.py:4) 5
not a sample line
"""


def test_raw_stacks_fold_into_inclusive_and_self_shares_per_thread() -> None:
    folded = pyspy.fold(RAW.splitlines())
    assert dict(folded.samples) == {"main": 10, "worker": 5}
    main = folded.inclusive["main"]
    assert main["_run (_run.py)"] == 10  # once per sample, whatever its line
    assert main["deliver (dispatcher.py)"] == 8
    assert folded.own["main"]["frame_post (request.py)"] == 6
    assert folded.own["worker"]["complete_runs (completions.py)"] == 5
    assert " 80.0% deliver (dispatcher.py)" in pyspy.report(folded, top=10)


def test_fold_keeps_the_named_threads_only() -> None:
    assert dict(pyspy.fold(RAW.splitlines(), thread="run_group").samples) == {"worker": 5}
