"""``/v1/signing-secrets``: rotation with an overlap, at most three active, expiry of one
(never the last), what the dispatcher signs with, and isolation."""

from __future__ import annotations

from appliance.core.instants import format_instant
from appliance.store.active_secrets import active_secrets
from appliance.store.infra.database import Database
from tests.api.conftest import Api, FakeClock


async def rotate(api: Api, overlap: int | None = None) -> dict[str, str]:
    body = None if overlap is None else {"overlap_seconds": overlap}
    reply = await api.call("POST", "/v1/signing-secrets/rotate", json_body=body)
    assert reply.status == 201, reply.body
    return reply.body  # type: ignore[no-any-return]


async def listed(api: Api) -> list[dict[str, str]]:
    return (await api.call("GET", "/v1/signing-secrets")).body["items"]  # type: ignore[no-any-return]


async def test_a_rotation_signs_with_both_until_the_overlap_ends(
    api: Api, db: Database, clock: FakeClock
) -> None:
    (first,) = await listed(api)
    assert first["expires_at"] is None and first["masked"].startswith("whsec_…")
    new = await rotate(api, overlap=60)
    assert new["secret"].startswith("whsec_") and new["masked"].endswith(new["secret"][-5:-1])
    now = await listed(api)
    assert [s["id"] for s in now] == [new["id"], first["id"]]
    assert now[1]["expires_at"] == format_instant(clock.now + 60_000)
    signing = db.read_now(active_secrets, tenant_id=api.tenant_id, now=clock.now)
    assert signing[0] == new["secret"] and len(signing) == 2
    clock.advance(60_000)
    assert [s["id"] for s in await listed(api)] == [new["id"]]
    assert db.read_now(active_secrets, tenant_id=api.tenant_id, now=clock.now) == [new["secret"]]


async def test_the_default_overlap_is_a_day_and_zero_replaces_at_once(
    api: Api, clock: FakeClock
) -> None:
    await rotate(api)
    assert (await listed(api))[1]["expires_at"] == format_instant(clock.now + 86_400_000)
    newest = await rotate(api, overlap=0)
    assert [s["id"] for s in await listed(api)] == [newest["id"]]


async def test_a_shorter_overlap_never_cuts_an_earlier_rotations(
    api: Api, clock: FakeClock
) -> None:
    (first,) = await listed(api)
    await rotate(api, overlap=3600)
    clock.advance(60_000)
    second = await rotate(api, overlap=60)
    expiries = {s["id"]: s["expires_at"] for s in await listed(api)}
    assert expiries[first["id"]] == format_instant(clock.now - 60_000 + 3_600_000)
    assert len(expiries) == 3 and expiries[second["id"]] is None
    clock.advance(120_000)  # the second rotation's overlap is over, the first's is not
    assert first["id"] in {s["id"] for s in await listed(api)}


async def test_at_most_three_are_active(api: Api) -> None:
    await rotate(api, overlap=60)
    await rotate(api, overlap=60)
    refused = await api.call(
        "POST", "/v1/signing-secrets/rotate", json_body={"overlap_seconds": 60}
    )
    assert refused.status == 409 and "at most 3" in refused.body["detail"]
    assert len(await listed(api)) == 3


async def test_one_can_be_expired_now_but_never_the_last(api: Api) -> None:
    (first,) = await listed(api)
    refused = await api.call("DELETE", f"/v1/signing-secrets/{first['id']}")
    assert refused.status == 409 and "only active secret" in refused.body["detail"]
    await rotate(api, overlap=3600)
    expired = await api.call("DELETE", f"/v1/signing-secrets/{first['id']}")
    assert expired.status == 200 and expired.body["id"] == first["id"]
    assert first["id"] not in str(await listed(api))


async def test_another_tenants_secret_is_404_and_stays(api: Api, other: Api) -> None:
    await rotate(other, overlap=60)
    theirs = await listed(other)
    reply = await api.call("DELETE", f"/v1/signing-secrets/{theirs[1]['id']}")
    assert reply.status == 404
    assert await listed(other) == theirs


async def test_bad_overlaps_are_422(api: Api) -> None:
    for body, field in [
        ({"overlap_seconds": -1}, "overlap_seconds"),
        ({"overlap_seconds": 604_801}, "overlap_seconds"),
        ({"overlap_seconds": "60"}, "overlap_seconds"),
        ({"overlap_seconds": True}, "overlap_seconds"),
        ({"overlap": 60}, "overlap"),
        ([], "body"),
    ]:
        reply = await api.call("POST", "/v1/signing-secrets/rotate", json_body=body)
        assert reply.status == 422 and reply.fields == [field], body
    assert len(await listed(api)) == 1


async def test_an_integral_float_overlap_is_accepted_as_json_schema_counts_integers(
    api: Api, clock: FakeClock
) -> None:
    reply = await api.call(
        "POST", "/v1/signing-secrets/rotate", json_body={"overlap_seconds": 60.0}
    )
    assert reply.status == 201
    assert (await listed(api))[1]["expires_at"] == format_instant(clock.now + 60_000)


async def test_rotate_is_not_a_secret_id(api: Api) -> None:
    reply = await api.call("DELETE", "/v1/signing-secrets/rotate")
    assert reply.status == 405 and set(reply.headers["Allow"].split(", ")) == {"OPTIONS", "POST"}
    assert len(await listed(api)) == 1
