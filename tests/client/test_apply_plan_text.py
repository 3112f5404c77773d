"""How ``steeple apply`` prints a plan, and names an appliance's refusal by file line."""

from __future__ import annotations

import textwrap

from appliance.client.apply import refusals, render_plan
from appliance.client.http import ApiProblem
from appliance.client.schedules_file import load


def counts(**found: int) -> dict[str, int]:
    return {
        "create": 0, "change": 0, "delete": 0, "unchanged": 0, "unkeyed": 0, "unlisted": 0,
        **found,
    }  # fmt: skip


def test_a_create_shows_what_it_sends_and_when() -> None:
    (item,) = load(
        textwrap.dedent(
            """\
            [[schedule]]
            key = "rollup"
            name = "Rollup"
            cron = "0 3 * * *"
            timezone = "Europe/Berlin"
            target_url = "https://example.com/rollup"
            method = "GET"
            """
        ),
        env={},
    )
    plan = {
        "applied": True,
        "changed": True,
        "items": [{"key": "rollup", "action": "create", "index": 0, "schedule_id": "sch_1"}],
        "counts": counts(create=1),
    }
    assert render_plan(plan, dry_run=False, items=[item]).splitlines() == [
        "+ rollup",
        '  GET https://example.com/rollup cron "0 3 * * *" in Europe/Berlin',
        "applied: created 1, changed 0, deleted 0",
    ]


def test_a_plan_prints_as_a_diff() -> None:
    plan = {
        "applied": True,
        "changed": True,
        "items": [
            {
                "key": "new",
                "action": "create",
                "index": 0,
                "schedule_id": "sch_1",
                "warnings": [{"code": "dst_gap", "message": "02:30 does not exist on 29 March"}],
            },
            {
                "key": "nightly",
                "action": "change",
                "index": 1,
                "schedule_id": "sch_2",
                "timing_changed": True,
                "changes": [
                    {"field": "name", "old": "a", "new": "b"},
                    {"field": "cron", "old": "0 3 * * *", "new": "0 4 * * *"},
                    {"field": "headers.X-Team", "old": None, "new": "ops"},
                ],
            },
            {"key": "same", "action": "unchanged", "index": 2, "schedule_id": "sch_3"},
            {"key": "old", "action": "delete", "index": None, "schedule_id": "sch_4"},
        ],
        "counts": counts(create=1, change=1, delete=1, unchanged=1, unkeyed=2),
    }
    timing = " (timing changes: occurrences follow the new timing from now)"
    assert render_plan(plan, dry_run=False).splitlines() == [
        "+ new",
        "  warning: 02:30 does not exist on 29 March",
        "~ nightly (sch_2)",
        '  name: "a" → "b"',
        '  cron: "0 3 * * *" → "0 4 * * *"' + timing,
        '  headers.X-Team: (none) → "ops"',
        "- old (sch_4)",
        "= 1 unchanged",
        "applied: created 1, changed 1, deleted 1",
        "2 schedule(s) without a key left alone",
    ]
    dry = render_plan({**plan, "applied": False}, dry_run=True)
    assert "would create 1, change 1, delete 1 (dry run: nothing written)" in dry


def test_an_unchanged_plan_says_nothing_to_change() -> None:
    plan = {
        "applied": True,
        "changed": False,
        "items": [{"key": "a", "action": "unchanged", "index": 0, "schedule_id": "sch_1"}],
        "counts": counts(unchanged=1),
    }
    assert render_plan(plan, dry_run=False) == "= 1 unchanged\nnothing to change\n"
    kept = {**plan, "counts": counts(unchanged=1, unlisted=2)}
    assert render_plan(kept, dry_run=False) == (
        "= 1 unchanged\nnothing to change\n"
        "2 keyed schedule(s) not in the file kept (--prune deletes them)\n"
    )


def test_a_refusal_names_each_problem_by_the_line_of_its_field() -> None:
    text = textwrap.dedent(
        """\
        [[schedule]]
        key = "a"
        cron = "nope"

        [[schedule]]
        key = "b"
        [schedule.retry]
        max_attempts = 0
        """
    )
    items = load(text, env={})
    problem = ApiProblem(
        422,
        {
            "type": "urn:steeple:problem:validation",
            "title": "Invalid",
            "status": 422,
            "detail": "…",
            "errors": [
                {"index": 0, "field": "cron", "message": "is not cron"},
                {"index": 1, "field": "retry.max_attempts", "message": "must be at least 1"},
                {"index": 1, "field": "target_url", "message": "is required"},
                {"field": "schedules", "message": "too many"},
            ],
        },
    )
    assert [p.render("s.toml") for p in refusals(problem, items)] == [
        "s.toml:3: cron: is not cron",
        "s.toml:8: retry.max_attempts: must be at least 1",
        "s.toml:5: target_url: is required",
        "s.toml: schedules: too many",
    ]
