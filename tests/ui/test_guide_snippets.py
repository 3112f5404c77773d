"""The receiver guide's snippets, as ``/guide`` shows them to a signed-in tenant (its own
values filled in), run against real deliveries of an appliance process: the ``curl``
snippet creates one-off schedules, the Python (Steeple's helper) and Node receivers
verify what arrives, and the openssl check verifies a delivery a test receiver saved.
Each output is waited for with a deadline; nothing sleeps."""

from __future__ import annotations

import html
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.harness import Appliance, Receiver, create_tenant, sign_in_form
from tests.ui.test_browser import PASSWORD, add_user

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 60


def snippets(base_url: str, email: str) -> dict[str, str]:
    """The guide page's snippets by name (``python``, ``node``, ``shell``, ``curl``)."""
    with httpx.Client(base_url=base_url, trust_env=False, timeout=30) as client:
        assert sign_in_form(client, email, PASSWORD).status_code == 302
        page = client.get("/guide").text
    found = re.findall(r'<pre class="snippet" id="snippet-(\w+)"[^>]*>(.*?)</pre>', page, re.S)
    return {name: html.unescape(text) for name, text in found}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Program:
    """A snippet run as a process; its output lines are read by a thread."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **env},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, prefix: str) -> str:
        deadline = time.monotonic() + DEADLINE_S
        seen = []
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starting {prefix!r} within {DEADLINE_S} s: {seen}")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._reader.join(timeout=10)  # the pipe ends with the process
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def send_yourself(curl_snippet: str, base_url: str, api_key: str, target: str) -> None:
    """Run the guide's curl snippet, aimed at ``target`` instead of port 8000."""
    script = curl_snippet.replace("http://127.0.0.1:8000/", target)
    done = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "STEEPLE_API_KEY": api_key},
    )
    assert done.returncode == 0 and '"id": "sch_' in done.stdout.replace('":"', '": "'), done


def test_every_guide_snippet_verifies_a_real_delivery(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    tenant = create_tenant(data_dir, "acme")
    add_user(data_dir, "viewer@acme.example", "acme", "viewer")
    app = Appliance(data_dir).start()
    saved = Receiver()
    programs: list[Program] = []
    try:
        shown = snippets(app.base_url, "viewer@acme.example")
        assert set(shown) == {"python", "node", "shell", "curl"}
        assert all(tenant["tenant_id"] in shown[n] for n in ("python", "node"))
        assert f"curl -s -X POST {app.base_url}/v1/schedules" in shown["curl"]
        secret = {"STEEPLE_SECRET": tenant["signing_secret"]}

        (tmp_path / "receiver.py").write_text(shown["python"])
        python_port = free_port()
        python = Program(
            [sys.executable, str(tmp_path / "receiver.py")],
            secret | {"PORT": str(python_port), "PYTHONPATH": str(REPO)},
        )
        programs.append(python)
        targets = [f"http://127.0.0.1:{python_port}/", saved.url]
        node = shutil.which("node")
        if node is not None:
            (tmp_path / "receiver.js").write_text(shown["node"])
            node_port = free_port()
            programs.append(
                Program([node, str(tmp_path / "receiver.js")], secret | {"PORT": str(node_port)})
            )
            targets.append(f"http://127.0.0.1:{node_port}/")
        for target in targets:
            send_yourself(shown["curl"], app.base_url, tenant["api_key"], target)

        assert re.fullmatch(r"verified [0-9a-f]{64} \S+Z", python.wait_for("verified"))
        if node is not None:
            assert re.fullmatch(r"verified [0-9a-f]{64} \S+Z", programs[1].wait_for("verified"))

        saved.wait_for(lambda deliveries: len(deliveries) >= 1)
        delivery = saved.snapshot()[0]
        (tmp_path / "body.bin").write_bytes(delivery.body)
        check = tmp_path / "check.sh"
        check.write_text(shown["shell"])
        headers = {
            "WEBHOOK_ID": delivery.headers["webhook-id"],
            "WEBHOOK_TIMESTAMP": delivery.headers["webhook-timestamp"],
            "WEBHOOK_SIGNATURE": delivery.headers["webhook-signature"],
        }

        def run_check() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["sh", str(check)],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=30,
                env={**os.environ, **secret, **headers},
            )

        verified = run_check()
        assert verified.returncode == 0 and verified.stdout == "verified\n", verified
        (tmp_path / "body.bin").write_bytes(delivery.body + b" ")  # one byte more: refused
        refused = run_check()
        assert refused.returncode == 1 and refused.stdout == "refused\n", refused
        if node is None:
            pytest.skip("the Python and shell snippets verified; no `node` here for the Node one")
    finally:
        for program in programs:
            program.stop()
        app.kill()
        saved.close()
