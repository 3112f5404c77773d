"""``steeple healthcheck``: exit 0 when the appliance on ``listen`` answers ``/readyz``
with 200, else 1, with one line either way. The standard library only (``urllib``): slim
container images have no curl, and it must not depend on the appliance's HTTP stack."""

from __future__ import annotations

import urllib.error
import urllib.request

from appliance.settings.model import Settings

TIMEOUT_S = 5.0


def probe_url(settings: Settings) -> str:
    """``/readyz`` on the listen address; a wildcard host is probed on loopback."""
    host = settings.listen.host
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{settings.listen.port}/readyz"


def check(settings: Settings) -> tuple[bool, str]:
    url = probe_url(settings)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    try:
        with opener.open(url, timeout=TIMEOUT_S) as response:
            return response.status == 200, f"{url}: {response.status}"
    except urllib.error.HTTPError as exc:
        return False, f"{url}: {exc.code} {exc.read(500).decode(errors='replace')}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"{url}: {reason}"
