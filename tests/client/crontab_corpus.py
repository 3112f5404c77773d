"""Real-world crontab lines and what ``steeple import-crontab`` makes of each: the exact
schedule (without its ``key``, tested on its own) or a part of the refusal's reason.

The forms are crontab(5)'s (fields, names, ranges, steps, lists, macros, environment lines,
``%``, the system format's user column) and the curl and wget calls people schedule.
Every case is read with :data:`ZONE` as the machine's zone, in the user format unless
``system``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ZONE = "America/New_York"
FORM = "application/x-www-form-urlencoded"
CURL_RETRY = {"initial": 1, "factor": 2, "max": 600}
TRANSIENT = [408, 429, 500, 502, 503, 504]


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str  # a part of the reason given


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    crontab: str
    expected: dict[str, object] | Refusal
    system: bool = False
    notes: tuple[str, ...] = field(default=())  # a part of each note the schedule carries


def schedule(
    name: str, method: str, url: str, cron: str, zone: str = ZONE, **fields: object
) -> dict[str, object]:
    return {
        "name": name,
        "method": method,
        "target_url": url,
        "cron": cron,
        "timezone": zone,
        **fields,
    }


CASES = [
    # --- timing: crontab(5)'s forms, as written, in the machine's zone --------------------
    Case(
        "every-minute",
        "* * * * * curl https://hooks.example.com/tick",
        schedule(
            "GET hooks.example.com/tick", "GET", "https://hooks.example.com/tick", "* * * * *"
        ),
    ),
    Case(
        "step-minutes",
        "*/15 * * * * curl -s https://example.com/poll",
        schedule("GET example.com/poll", "GET", "https://example.com/poll", "*/15 * * * *"),
    ),
    Case(
        "range-step",
        "0 8-18/2 * * * curl -s https://example.com/a",
        schedule("GET example.com/a", "GET", "https://example.com/a", "0 8-18/2 * * *"),
    ),
    Case(
        "list",
        "0,30 9,17 * * * curl -s https://example.com/b",
        schedule("GET example.com/b", "GET", "https://example.com/b", "0,30 9,17 * * *"),
    ),
    Case(
        "weekday-names",
        "30 6 * * mon-fri curl -s https://example.com/c",
        schedule("GET example.com/c", "GET", "https://example.com/c", "30 6 * * mon-fri"),
    ),
    Case(
        "month-names",
        "0 0 1 jan,apr,jul,oct * curl -s https://example.com/quarter",
        schedule(
            "GET example.com/quarter",
            "GET",
            "https://example.com/quarter",
            "0 0 1 jan,apr,jul,oct *",
        ),
    ),
    Case(
        "sunday-seven",
        "0 4 * * 7 curl -s https://example.com/sun",
        schedule("GET example.com/sun", "GET", "https://example.com/sun", "0 4 * * 7"),
    ),
    Case(
        "vixie-day-rule-or",
        "0 0 1,15 * 5 curl -s https://example.com/payday",
        schedule("GET example.com/payday", "GET", "https://example.com/payday", "0 0 1,15 * 5"),
    ),
    Case(
        "vixie-day-rule-and",
        "0 0 */2 * 1 curl -s https://example.com/odd-mondays",
        schedule(
            "GET example.com/odd-mondays", "GET", "https://example.com/odd-mondays", "0 0 */2 * 1"
        ),
    ),
    Case(
        "upper-case-names",
        "0 12 * DEC SUN curl -s https://example.com/x",
        schedule("GET example.com/x", "GET", "https://example.com/x", "0 12 * DEC SUN"),
    ),
    Case(
        "tabs-between-fields",
        "5\t4\t*\t*\t*\tcurl -s https://example.com/tabs",
        schedule("GET example.com/tabs", "GET", "https://example.com/tabs", "5 4 * * *"),
    ),
    Case(
        "leading-blanks",
        "   0 2 * * *   curl -s https://example.com/indented",
        schedule("GET example.com/indented", "GET", "https://example.com/indented", "0 2 * * *"),
    ),
    Case(
        "leap-day",
        "0 0 29 2 * curl -s https://example.com/leap",
        schedule("GET example.com/leap", "GET", "https://example.com/leap", "0 0 29 2 *"),
    ),
    Case("never-fires", "0 0 31 2 * curl -s https://example.com/n", Refusal("never fire")),
    Case("out-of-range", "61 * * * * curl -s https://example.com/n", Refusal("out of range")),
    Case(
        "step-from-one-value",
        "10/5 * * * * curl -s https://example.com/n",
        Refusal("a step from one value"),
    ),
    Case("quartz-extension", "0 0 L * * curl -s https://example.com/n", Refusal("not supported")),
    Case("a-field-missing", "0 3 * * curl https://example.com/x", Refusal("day of week")),
    Case("no-command", "0 3 * * *", Refusal("no command")),
    # --- macros ---------------------------------------------------------------------------
    Case(
        "daily",
        "@daily curl -s https://example.com/daily",
        schedule("GET example.com/daily", "GET", "https://example.com/daily", "@daily"),
    ),
    Case(
        "hourly",
        "@hourly wget -q -O /dev/null https://example.com/hourly",
        schedule("GET example.com/hourly", "GET", "https://example.com/hourly", "@hourly"),
    ),
    Case(
        "weekly",
        "@weekly curl -s https://example.com/w",
        schedule("GET example.com/w", "GET", "https://example.com/w", "@weekly"),
    ),
    Case(
        "monthly",
        "@monthly curl -s https://example.com/m",
        schedule("GET example.com/m", "GET", "https://example.com/m", "@monthly"),
    ),
    Case(
        "yearly",
        "@yearly curl -s https://example.com/y",
        schedule("GET example.com/y", "GET", "https://example.com/y", "@yearly"),
    ),
    Case(
        "annually",
        "@annually curl -s https://example.com/y",
        schedule("GET example.com/y", "GET", "https://example.com/y", "@annually"),
    ),
    Case(
        "midnight",
        "@midnight curl -s https://example.com/mid",
        schedule("GET example.com/mid", "GET", "https://example.com/mid", "@midnight"),
    ),
    Case("reboot", "@reboot curl -s https://example.com/boot", Refusal("@reboot runs once")),
    Case("unknown-macro", "@every_5m curl -s https://example.com/x", Refusal("unknown macro")),
    # --- the file around the entries -------------------------------------------------------
    Case(
        "cron-tz",
        "CRON_TZ=Europe/Berlin\n0 7 * * * curl -s https://example.com/berlin",
        schedule(
            "GET example.com/berlin",
            "GET",
            "https://example.com/berlin",
            "0 7 * * *",
            "Europe/Berlin",
        ),
    ),
    Case(
        "tz-is-only-environment",
        "TZ=Asia/Tokyo\n0 7 * * * curl -s https://example.com/local",
        schedule("GET example.com/local", "GET", "https://example.com/local", "0 7 * * *"),
    ),
    Case(
        "cron-tz-unknown",
        "CRON_TZ=Mars/Olympus\n0 7 * * * curl -s https://e.com/",
        Refusal("Mars/Olympus"),
    ),
    Case(
        "comment-names-it",
        "# Rebuild the search index\n0 1 * * * curl -s -X POST https://example.com/reindex",
        schedule(
            "Rebuild the search index", "POST", "https://example.com/reindex", "0 1 * * *", body=""
        ),
    ),
    Case(
        "system-user-column",
        "17 * * * * root curl -fsS https://example.com/sys",
        schedule("GET example.com/sys", "GET", "https://example.com/sys", "17 * * * *"),
        system=True,
    ),
    Case(
        "system-macro-user",
        "@daily www-data wget -q -O- https://example.com/wp-cron.php",
        schedule("GET example.com/wp-cron.php", "GET", "https://example.com/wp-cron.php", "@daily"),
        system=True,
    ),
    Case(
        "user-column-without-system",
        "17 * * * * root curl -fsS https://example.com/sys",
        Refusal("pass --system"),
    ),
    Case(
        "escaped-percent",
        r"0 5 * * * curl -s 'https://example.com/search?q=a\%20b'",
        schedule(
            "GET example.com/search", "GET", "https://example.com/search?q=a%20b", "0 5 * * *"
        ),
    ),
    Case(
        "unescaped-percent",
        "0 5 * * * curl -s https://example.com/d?day=$(date +%F)",
        Refusal("an unescaped %"),
    ),
    Case(
        "backslash-at-end",
        "0 5 * * * curl -s \\\n  https://example.com/next",
        Refusal("no line continuation"),
    ),
    # --- curl: methods and bodies ----------------------------------------------------------
    Case(
        "post-form",
        "0 * * * * curl -d 'a=1&b=2' https://example.com/form",
        schedule(
            "POST example.com/form",
            "POST",
            "https://example.com/form",
            "0 * * * *",
            body="a=1&b=2",
            content_type=FORM,
        ),
    ),
    Case(
        "post-json-header",
        """0 * * * * curl -X POST -H 'Content-Type: application/json' -d '{"job":"rollup"}' https://api.example.com/v1/jobs""",
        schedule(
            "POST api.example.com/v1/jobs",
            "POST",
            "https://api.example.com/v1/jobs",
            "0 * * * *",
            body='{"job":"rollup"}',
            content_type="application/json",
        ),
    ),
    Case(
        "json-option",
        """0 * * * * curl --json '{"a": 1}' https://example.com/j""",
        schedule(
            "POST example.com/j",
            "POST",
            "https://example.com/j",
            "0 * * * *",
            headers={"Accept": "application/json"},
            body='{"a": 1}',
            content_type="application/json",
        ),
    ),
    Case(
        "data-raw-keeps-at",
        "0 * * * * curl --data-raw '@not-a-file' https://example.com/raw",
        schedule(
            "POST example.com/raw",
            "POST",
            "https://example.com/raw",
            "0 * * * *",
            body="@not-a-file",
            content_type=FORM,
        ),
    ),
    Case(
        "data-binary-literal",
        "0 * * * * curl --data-binary 'line' -H 'Content-Type: text/plain' https://example.com/t",
        schedule(
            "POST example.com/t",
            "POST",
            "https://example.com/t",
            "0 * * * *",
            body="line",
            content_type="text/plain",
        ),
    ),
    Case(
        "several-data-join",
        "0 * * * * curl -d a=1 -d b=2 https://example.com/f",
        schedule(
            "POST example.com/f",
            "POST",
            "https://example.com/f",
            "0 * * * *",
            body="a=1&b=2",
            content_type=FORM,
        ),
    ),
    Case(
        "data-urlencode",
        "0 * * * * curl --data-urlencode 'msg=hello world&more' https://example.com/u",
        schedule(
            "POST example.com/u",
            "POST",
            "https://example.com/u",
            "0 * * * *",
            body="msg=hello%20world%26more",
            content_type=FORM,
        ),
    ),
    Case(
        "put",
        "0 * * * * curl -X PUT -d 'on' https://example.com/switch",
        schedule(
            "PUT example.com/switch",
            "PUT",
            "https://example.com/switch",
            "0 * * * *",
            body="on",
            content_type=FORM,
        ),
    ),
    Case(
        "patch-glued",
        "0 * * * * curl -XPATCH https://example.com/p",
        schedule("PATCH example.com/p", "PATCH", "https://example.com/p", "0 * * * *", body=""),
        notes=("curl sent this PATCH with no body and no Content-Type",),
    ),
    Case(
        "delete",
        "0 3 * * 0 curl -s -X DELETE https://example.com/cache",
        schedule("DELETE example.com/cache", "DELETE", "https://example.com/cache", "0 3 * * 0"),
    ),
    Case(
        "request-long-lowercase",
        "0 * * * * curl --request post https://example.com/lc",
        schedule("POST example.com/lc", "POST", "https://example.com/lc", "0 * * * *", body=""),
    ),
    Case(
        "get-with-data",
        "0 * * * * curl -G -d since=1h -d limit=10 https://example.com/report",
        schedule(
            "GET example.com/report",
            "GET",
            "https://example.com/report?since=1h&limit=10",
            "0 * * * *",
        ),
    ),
    Case(
        "get-body-refused",
        "0 * * * * curl -X GET -d x=1 https://example.com/",
        Refusal("carries none"),
    ),
    Case("head-refused", "0 * * * * curl -I https://example.com/", Refusal("HEAD")),
    Case(
        "options-refused", "0 * * * * curl -X OPTIONS https://example.com/", Refusal("-X OPTIONS")
    ),
    Case(
        "data-file",
        "0 * * * * curl -d @/etc/payload.json https://example.com/",
        Refusal("sends a file"),
    ),
    Case(
        "data-binary-file",
        "0 * * * * curl --data-binary @report.csv https://example.com/",
        Refusal("sends a file"),
    ),
    Case(
        "form-refused", "0 * * * * curl -F file=@a.txt https://example.com/", Refusal("multipart")
    ),
    # --- curl: headers, auth, limits, retries ----------------------------------------------
    Case(
        "bearer-header",
        "*/10 * * * * curl -sf -H 'Authorization: Bearer abc123' https://api.example.com/sync",
        schedule(
            "GET api.example.com/sync",
            "GET",
            "https://api.example.com/sync",
            "*/10 * * * *",
            headers={"Authorization": "Bearer abc123"},
        ),
        notes=("the Authorization header holds a credential in clear",),
    ),
    Case(
        "header-from-crontab-variable",
        'TOKEN=abc\n0 * * * * curl -H "X-Token: $TOKEN" https://example.com/v',
        schedule(
            "GET example.com/v",
            "GET",
            "https://example.com/v",
            "0 * * * *",
            headers={"X-Token": "${TOKEN}"},
        ),
        notes=("set TOKEN where steeple apply runs",),
    ),
    Case(
        "url-from-crontab-variable",
        "BASE=https://example.com\n0 * * * * curl -s $BASE/hook",
        schedule("GET example.com/hook", "GET", "https://example.com/hook", "0 * * * *"),
        notes=("value set on line 1",),
    ),
    Case("unknown-variable", "0 * * * * curl -s $API_URL/hook", Refusal("$API_URL is not set")),
    Case(
        "basic-auth",
        "0 6 * * * curl -u admin:s3cret https://example.com/admin/run",
        schedule(
            "GET example.com/admin/run",
            "GET",
            "https://example.com/admin/run",
            "0 6 * * *",
            headers={"Authorization": "Basic YWRtaW46czNjcmV0"},
        ),
        notes=("holds a password",),
    ),
    Case(
        "user-without-password",
        "0 6 * * * curl -u admin https://example.com/",
        Refusal("no password"),
    ),
    Case(
        "user-agent-and-referer",
        "0 * * * * curl -A 'steeple-move/1' -e https://example.com/ https://example.com/ua",
        schedule(
            "GET example.com/ua",
            "GET",
            "https://example.com/ua",
            "0 * * * *",
            headers={"Referer": "https://example.com/"},
        ),
        notes=("Steeple sends its own User-Agent",),
    ),
    Case(
        "max-time",
        "0 * * * * curl -m 45 https://example.com/slow",
        schedule(
            "GET example.com/slow",
            "GET",
            "https://example.com/slow",
            "0 * * * *",
            timeout_seconds=45,
        ),
    ),
    Case(
        "max-time-fraction",
        "0 * * * * curl --max-time 2.5 https://example.com/fast",
        schedule(
            "GET example.com/fast",
            "GET",
            "https://example.com/fast",
            "0 * * * *",
            timeout_seconds=3,
        ),
    ),
    Case(
        "max-time-above-limit",
        "0 * * * * curl --max-time 900 https://example.com/long",
        schedule(
            "GET example.com/long",
            "GET",
            "https://example.com/long",
            "0 * * * *",
            timeout_seconds=300,
        ),
        notes=("above Steeple's limit",),
    ),
    Case(
        "retry",
        "0 * * * * curl --retry 3 https://example.com/r",
        schedule(
            "GET example.com/r",
            "GET",
            "https://example.com/r",
            "0 * * * *",
            retry={"max_attempts": 4, "backoff": CURL_RETRY, "retry_on_status": TRANSIENT},
        ),
    ),
    Case(
        "retry-delay-all-errors",
        "0 * * * * curl --retry 5 --retry-delay 30 --retry-all-errors https://example.com/r",
        schedule(
            "GET example.com/r",
            "GET",
            "https://example.com/r",
            "0 * * * *",
            retry={"max_attempts": 6, "backoff": [30]},
        ),
    ),
    Case(
        "retry-max-time",
        "0 * * * * curl --retry 2 --retry-max-time 120 https://example.com/r",
        schedule(
            "GET example.com/r",
            "GET",
            "https://example.com/r",
            "0 * * * *",
            retry={
                "max_attempts": 3,
                "backoff": CURL_RETRY,
                "retry_on_status": TRANSIENT,
                "max_age_seconds": 120,
            },
        ),
    ),
    Case(
        "the-usual-flags",
        "*/5 * * * * curl -fsSL --compressed -o /dev/null -w '%{http_code}' https://example.com/h",
        Refusal("an unescaped %"),
    ),
    Case(
        "the-usual-flags-escaped",
        r"*/5 * * * * curl -fsSL --compressed -o /dev/null -w '\%{http_code}' https://example.com/h",
        schedule("GET example.com/h", "GET", "https://example.com/h", "*/5 * * * *"),
        notes=("does not follow redirects",),
    ),
    Case(
        "healthchecks-ping",
        "*/5 * * * * curl -fsS -m 10 --retry 5 -o /dev/null https://hc-ping.com/3f0c3a2e-uuid",
        schedule(
            "GET hc-ping.com/3f0c3a2e-uuid",
            "GET",
            "https://hc-ping.com/3f0c3a2e-uuid",
            "*/5 * * * *",
            timeout_seconds=10,
            retry={"max_attempts": 6, "backoff": CURL_RETRY, "retry_on_status": TRANSIENT},
        ),
    ),
    Case(
        "expect-removed",
        "0 * * * * curl -H 'Expect:' -d x https://example.com/e",
        schedule(
            "POST example.com/e",
            "POST",
            "https://example.com/e",
            "0 * * * *",
            body="x",
            content_type=FORM,
        ),
        notes=("only removes a curl default",),
    ),
    Case("insecure-refused", "0 * * * * curl -k https://self-signed.example/", Refusal("TLS")),
    Case(
        "unknown-option",
        "0 * * * * curl --proxy http://p:3128 https://example.com/",
        Refusal("--proxy"),
    ),
    Case(
        "long-option-equals",
        "0 * * * * curl --max-time=10 https://example.com/",
        Refusal("--max-time 10"),
    ),
    Case(
        "reserved-header",
        "0 * * * * curl -H 'Host: other.example' https://example.com/",
        Refusal("headers.Host"),
    ),
    Case(
        "no-scheme",
        "0 * * * * curl -s example.com/bare",
        schedule("GET example.com/bare", "GET", "http://example.com/bare", "0 * * * *"),
        notes=("has no scheme",),
    ),
    Case("ftp-refused", "0 * * * * curl -s ftp://example.com/file", Refusal("not HTTP")),
    Case(
        "two-urls",
        "0 * * * * curl https://a.example/ https://b.example/",
        Refusal("more than one URL"),
    ),
    Case(
        "url-glob",
        "0 * * * * curl 'https://example.com/page[1-3]'",
        Refusal("pattern of several URLs"),
    ),
    Case(
        "url-glob-off",
        "0 * * * * curl -g 'https://example.com/page[1]'",
        schedule("GET example.com/page[1]", "GET", "https://example.com/page[1]", "0 * * * *"),
    ),
    Case(
        "absolute-path-curl",
        "0 * * * * /usr/bin/curl -s https://example.com/abs",
        schedule("GET example.com/abs", "GET", "https://example.com/abs", "0 * * * *"),
    ),
    # --- the shell around the call -------------------------------------------------------
    Case(
        "dev-null-redirections",
        "0 * * * * curl -s https://example.com/q > /dev/null 2>&1",
        schedule("GET example.com/q", "GET", "https://example.com/q", "0 * * * *"),
    ),
    Case(
        "bash-both-outputs",
        "0 * * * * curl -s https://example.com/q &>/dev/null",
        schedule("GET example.com/q", "GET", "https://example.com/q", "0 * * * *"),
    ),
    Case(
        "or-true",
        "0 * * * * curl -fsS https://example.com/q >/dev/null 2>&1 || true",
        schedule("GET example.com/q", "GET", "https://example.com/q", "0 * * * *"),
    ),
    Case(
        "log-file",
        "0 * * * * curl -s https://example.com/q >> /var/log/q.log 2>&1",
        Refusal("/var/log/q.log"),
    ),
    Case(
        "pipeline",
        "0 * * * * curl -s https://example.com/feed | mail -s feed me",
        Refusal("pipeline"),
    ),
    Case(
        "and-list",
        "0 * * * * sleep 30 && curl -s https://example.com/",
        Refusal("list of commands (&&)"),
    ),
    Case(
        "then-list",
        "0 * * * * curl -s https://example.com/ && echo done",
        Refusal("list of commands (&&)"),
    ),
    Case(
        "semicolon",
        "0 * * * * cd /tmp; curl -s https://example.com/",
        Refusal("list of commands (;)"),
    ),
    Case(
        "unquoted-ampersand", "0 * * * * curl https://example.com/?a=1&b=2", Refusal("unquoted &")
    ),
    Case("subshell", "0 * * * * (curl -s https://example.com/)", Refusal("subshell")),
    Case(
        "command-substitution",
        '0 * * * * curl -H "X-Host: $(hostname)" https://example.com/',
        Refusal("command substitution"),
    ),
    Case(
        "backquotes",
        "0 * * * * curl https://example.com/`hostname`",
        Refusal("command substitution"),
    ),
    Case("script", "30 2 * * * /usr/local/bin/backup.sh", Refusal("not curl or wget")),
    Case(
        "env-prefix", "0 * * * * LANG=C curl https://example.com/", Refusal("sets its environment")
    ),
    Case(
        "shell-comment-after",
        "0 * * * * curl -s https://example.com/c # keep the cache warm",
        schedule("GET example.com/c", "GET", "https://example.com/c", "0 * * * *"),
    ),
    Case(
        "timeout-wrapper",
        "0 * * * * timeout 2m curl -s https://example.com/slow-report",
        schedule(
            "GET example.com/slow-report",
            "GET",
            "https://example.com/slow-report",
            "0 * * * *",
            timeout_seconds=120,
        ),
    ),
    Case(
        "timeout-wrapper-and-max-time",
        "0 * * * * timeout 60 curl -s -m 10 https://example.com/t",
        schedule(
            "GET example.com/t", "GET", "https://example.com/t", "0 * * * *", timeout_seconds=10
        ),
    ),
    Case(
        "flock-nonblocking-is-overlap-skip",
        "* * * * * /usr/bin/flock -n /tmp/sync.lock curl -fsS -X POST https://example.com/sync",
        schedule(
            "POST example.com/sync",
            "POST",
            "https://example.com/sync",
            "* * * * *",
            body="",
            overlap="skip",
        ),
        notes=("overlap skip",),
    ),
    Case(
        "flock-blocking-refused",
        "* * * * * flock /tmp/sync.lock curl https://example.com/sync",
        Refusal("only `flock -n FILE command`"),
    ),
    Case(
        "nice-dropped",
        "0 3 * * * nice -n 19 ionice -c3 wget -q -O /dev/null https://example.com/backup",
        schedule("GET example.com/backup", "GET", "https://example.com/backup", "0 3 * * *"),
    ),
    # --- wget ------------------------------------------------------------------------------
    Case(
        "wget-quiet-stdout",
        "*/5 * * * * wget -qO- https://example.com/cron.php",
        schedule("GET example.com/cron.php", "GET", "https://example.com/cron.php", "*/5 * * * *"),
    ),
    Case(
        "wget-post-data",
        "0 * * * * wget -q -O /dev/null --post-data='token=x&run=1' https://example.com/run",
        schedule(
            "POST example.com/run",
            "POST",
            "https://example.com/run",
            "0 * * * *",
            body="token=x&run=1",
            content_type=FORM,
        ),
    ),
    Case(
        "wget-method-body",
        "0 * * * * wget -q -O- --method=PUT --body-data='{}'"
        " --header='Content-Type: application/json' https://example.com/w",
        schedule(
            "PUT example.com/w",
            "PUT",
            "https://example.com/w",
            "0 * * * *",
            body="{}",
            content_type="application/json",
        ),
    ),
    Case(
        "wget-delete",
        "0 * * * * wget -q -O- --method=DELETE https://example.com/old",
        schedule("DELETE example.com/old", "DELETE", "https://example.com/old", "0 * * * *"),
    ),
    Case(
        "wget-put-without-data",
        "0 * * * * wget -q -O- --method=PUT https://example.com/touch",
        schedule("PUT example.com/touch", "PUT", "https://example.com/touch", "0 * * * *", body=""),
        notes=("wget sent this PUT with no body and no Content-Type",),
    ),
    Case(
        "wget-body-data-is-form-encoded",
        "0 * * * * wget -q -O- --method=PATCH --body-data=a=1 https://example.com/p",
        schedule(
            "PATCH example.com/p",
            "PATCH",
            "https://example.com/p",
            "0 * * * *",
            body="a=1",
            content_type=FORM,
        ),
    ),
    Case(
        "wget-header-variable",
        'KEY=k\n0 * * * * wget -qO- --header="X-Api-Key: $KEY" https://example.com/k',
        schedule(
            "GET example.com/k",
            "GET",
            "https://example.com/k",
            "0 * * * *",
            headers={"X-Api-Key": "${KEY}"},
        ),
    ),
    Case(
        "wget-timeout-tries",
        "0 * * * * wget -q -O- --timeout=20 --tries=3 https://example.com/t",
        schedule(
            "GET example.com/t",
            "GET",
            "https://example.com/t",
            "0 * * * *",
            timeout_seconds=20,
            retry={"max_attempts": 3, "backoff": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]},
        ),
        notes=("limits each wait in wget",),
    ),
    Case(
        "wget-short-values",
        "0 * * * * wget -q -O - -T 5 -t 2 --waitretry=3 https://example.com/s",
        schedule(
            "GET example.com/s",
            "GET",
            "https://example.com/s",
            "0 * * * *",
            timeout_seconds=5,
            retry={"max_attempts": 2, "backoff": [1, 2, 3]},
        ),
    ),
    Case(
        "wget-basic-auth",
        "0 * * * * wget -qO- --user=bob --password=pw https://example.com/b",
        schedule(
            "GET example.com/b",
            "GET",
            "https://example.com/b",
            "0 * * * *",
            headers={"Authorization": "Basic Ym9iOnB3"},
        ),
    ),
    Case(
        "wget-saves-a-file",
        "0 * * * * wget https://example.com/dl",
        schedule("GET example.com/dl", "GET", "https://example.com/dl", "0 * * * *"),
        notes=("saved each answer in a file",),
    ),
    Case(
        "wget-tries-forever", "0 * * * * wget -qO- -t 0 https://example.com/", Refusal("for ever")
    ),
    Case("wget-spider", "0 * * * * wget --spider https://example.com/", Refusal("HEAD")),
    Case(
        "wget-post-file",
        "0 * * * * wget --post-file=a.json https://example.com/",
        Refusal("file of the old machine"),
    ),
    Case(
        "wget-output-file",
        "0 * * * * wget -O /tmp/page.html https://example.com/",
        Refusal("writes a file"),
    ),
    Case("wget-recursive", "0 * * * * wget -r https://example.com/", Refusal("wget option -r")),
]
