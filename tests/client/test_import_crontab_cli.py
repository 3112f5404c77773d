"""``steeple import-crontab`` as a subprocess on whole crontab files: the apply file it
writes loads through the file format back to the schedules, every line not moved is
listed in the file and on stderr, and the exit code says whether everything moved."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from appliance.cli.crontab import local_zone
from appliance.client.schedules_file import load

CRONTAB = r"""# m h dom mon dow command
SHELL=/bin/sh
MAILTO=ops@example.com
API_TOKEN=not-in-the-file

# Roll up yesterday's orders
5 0 * * * curl -fsS -m 60 --retry 2 -X POST -H "Authorization: Bearer $API_TOKEN" https://shop.example.com/jobs/rollup >/dev/null 2>&1
*/10 * * * * wget -q -O /dev/null 'https://example.com/wp-cron.php?doing_wp_cron'
CRON_TZ=Asia/Kolkata
30 9 * * mon-fri curl -s -d 'report=daily\%20sales' https://reports.example.com/send
@reboot curl -s https://example.com/booted
0 4 * * * /usr/local/bin/backup.sh > /var/log/backup.log 2>&1
"""  # noqa: E501 - a crontab line as long as real ones


def _import(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "appliance", "import-crontab", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "TZ": "Europe/Lisbon", **(env or {})},
    )


def test_a_whole_crontab_becomes_an_apply_file_and_a_list_of_what_did_not_move(
    tmp_path: Path,
) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text(CRONTAB, encoding="utf-8")
    out = tmp_path / "schedules.toml"
    done = _import(str(crontab), "-o", str(out))
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "steeple: line 11 not moved: @reboot runs once when the machine starts; Steeple"
        " schedules fire by time",
        "steeple: line 12 not moved: runs '/usr/local/bin/backup.sh', not curl or wget: only"
        " HTTP calls move to Steeple; and the redirection >/var/log/backup.log writes the"
        " output somewhere Steeple does not (only >/dev/null and 2>&1 are accepted: Steeple"
        " keeps each answer in the run)",
    ]
    text = out.read_text(encoding="utf-8")
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert "# Zone: Europe/Lisbon (this machine's zone, from TZ); a CRON_TZ" in header[1]
    assert "#   line 11: @reboot curl -s https://example.com/booted" in header
    assert "#   line 12: 0 4 * * * /usr/local/bin/backup.sh > /var/log/backup.log 2>&1" in header
    assert any("line 3: MAILTO=ops@example.com" in line for line in header)
    items = load(text, env={"API_TOKEN": "t0ken"})
    documents = [{k: v for k, v in item.document.items() if k != "key"} for item in items]
    assert documents == [
        {
            "name": "Roll up yesterday's orders",
            "cron": "5 0 * * *",
            "timezone": "Europe/Lisbon",
            "target_url": "https://shop.example.com/jobs/rollup",
            "method": "POST",
            "headers": {"Authorization": "Bearer t0ken"},
            "body": "",
            "timeout_seconds": 60,
            "retry": {
                "max_attempts": 3,
                "backoff": {"initial": 1, "factor": 2, "max": 600},
                "retry_on_status": [408, 429, 500, 502, 503, 504],
            },
        },
        {
            "name": "GET example.com/wp-cron.php",
            "cron": "*/10 * * * *",
            "timezone": "Europe/Lisbon",
            "target_url": "https://example.com/wp-cron.php?doing_wp_cron",
            "method": "GET",
        },
        {
            "name": "POST reports.example.com/send",
            "cron": "30 9 * * mon-fri",
            "timezone": "Asia/Kolkata",
            "target_url": "https://reports.example.com/send",
            "method": "POST",
            "body": "report=daily%20sales",
            "content_type": "application/x-www-form-urlencoded",
        },
    ]


def test_a_second_import_of_the_same_crontab_gives_the_same_keys(tmp_path: Path) -> None:
    first, again = _import("-", stdin=CRONTAB), _import("-", stdin=CRONTAB + "\n# later\n")
    keys = [item.key for item in load(first.stdout, env={"API_TOKEN": "x"})]
    assert len(set(keys)) == 3
    assert keys == [item.key for item in load(again.stdout, env={"API_TOKEN": "x"})]


def test_everything_moved_exits_0_and_the_dry_run_prints_only_the_summary() -> None:
    done = _import("--dry-run", "--timezone", "UTC", "-", stdin="@hourly curl -s https://e.com/\n")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[:4] == [
        "Zone: UTC (--timezone).",
        "1 line(s) moved, 0 not moved.",
        "Moved:",
        done.stdout.splitlines()[3],
    ]
    assert "GET https://e.com/ at '@hourly' in UTC" in done.stdout
    assert "[[schedule]]" not in done.stdout


def test_the_dry_run_lists_a_line_not_moved_once_and_exits_1() -> None:
    done = _import("--dry-run", "--timezone", "UTC", "-", stdin="@reboot curl -s https://e.com/\n")
    assert (done.returncode, done.stderr) == (1, "")  # not again on stderr
    assert done.stdout.count("@reboot runs once") == 1


def test_the_system_format_is_read_for_etc_crontab_or_with_system(tmp_path: Path) -> None:
    line = "17 * * * * root curl -s https://e.com/hourly\n"
    assert _import("--timezone", "UTC", "-", stdin=line).returncode == 1
    assert _import("--system", "--timezone", "UTC", "-", stdin=line).returncode == 0


def test_usage_errors_exit_2_and_write_nothing(tmp_path: Path) -> None:
    missing = _import(str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert missing.stderr == (
        f"steeple: error: cannot read {tmp_path / 'nope'}: No such file or directory\n"
    )
    unwritable = tmp_path / "missing" / "s.toml"
    written = _import("--timezone", "UTC", "-o", str(unwritable), "-", stdin="@daily curl e.com\n")
    assert written.returncode == 2
    assert written.stderr == (
        f"steeple: error: cannot write {unwritable}: No such file or directory\n"
    )
    zone = _import("--timezone", "Mars/Olympus", "-", stdin="")
    assert zone.returncode == 2 and "Mars/Olympus" in zone.stderr
    assert _import().returncode == 2  # argparse: FILE is required
    assert list(tmp_path.iterdir()) == []


def test_the_local_zone_is_the_machines_as_cron_sees_it(tmp_path: Path) -> None:
    link = tmp_path / "localtime"
    link.symlink_to("/usr/share/zoneinfo/America/Chicago")
    named = tmp_path / "timezone"
    assert local_zone(None, link, named).name == "America/Chicago"
    assert local_zone(":Europe/Oslo", link, named).name == "Europe/Oslo"
    named.write_text("Pacific/Auckland\n", encoding="utf-8")
    assert local_zone(None, tmp_path / "absent", named).name == "Pacific/Auckland"
    assert local_zone(None, tmp_path / "absent", tmp_path / "none").name == "UTC"


def test_apply_refuses_a_file_whose_variable_is_unset_and_sends_nothing(tmp_path: Path) -> None:
    # Port 9 (discard) on loopback: nothing listens, and nothing is sent, since the file is
    # refused before a request is made.
    appliance = {"STEEPLE_URL": "http://127.0.0.1:9", "STEEPLE_API_KEY": "stp_x"}
    line = 'T=x\n0 * * * * curl -H "X-Token: $T" https://e.com/\n'
    env = {**appliance, "XDG_CONFIG_HOME": str(tmp_path)}
    done = _import("--apply", "--timezone", "UTC", "-", stdin=line, env=env)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "steeple: standard input line 2 (e-fead16): headers.X-Token: ${T} is not set in the"
        " environment",  # where the user can find it: no file was written to point into
        "steeple: nothing applied",
    ]
    assert done.stdout == ""
    out = tmp_path / "s.toml"
    written = _import("--apply", "--timezone", "UTC", "-o", str(out), "-", stdin=line, env=env)
    lines = out.read_text(encoding="utf-8").splitlines()
    [at] = [n for n, text in enumerate(lines, start=1) if text.startswith("headers = ")]
    assert written.stderr.splitlines()[0].startswith(f"steeple: {out}:{at}: headers.X-Token")


def test_a_variable_in_a_header_is_substituted_by_apply_however_the_header_is_spelled() -> None:
    # curl -H, wget --header VALUE and wget --header=VALUE: each ${TOKEN} stays a
    # placeholder in the file (not the escaped literal $${TOKEN}), which load fills in.
    lines = [
        '0 * * * * curl -H "Authorization: Bearer $TOKEN" https://e.com/a',
        '0 * * * * wget -q -O- --header "Authorization: Bearer $TOKEN" https://e.com/b',
        '0 * * * * wget -q -O- --header="Authorization: Bearer $TOKEN" https://e.com/c',
    ]
    done = _import("--timezone", "UTC", "-", stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    assert "$${" not in done.stdout
    items = load(done.stdout, env={"TOKEN": "t0k"})
    assert [i.document["headers"] for i in items] == [{"Authorization": "Bearer t0k"}] * 3
