"""Managing a tenant's people (store/people.py), on both stores: the last owner stays,
removal ends sessions at once, a reset kills old sessions and links, one's own password
change and "end my other sessions" keep the current session, and each change is one
event naming its actor."""

from __future__ import annotations

import pytest

from appliance.core.events import Actor
from appliance.errors import Conflict, NotFound
from appliance.store.events import list_events
from appliance.store.infra.backend import Store
from appliance.store.people import (
    LAST_OWNER,
    change_password,
    change_role,
    end_other_sessions,
    find_member,
    members,
    other_sessions,
    remove_user,
    reset_user,
)
from appliance.store.sessions import find_session, start_session
from appliance.store.users import Role, User, create_user, get_user, setup_user
from tests.store.conftest import T0

OWNER = Actor.user("usr_01J0000000000000000000OWNR")


def add(db: Store, tenant: str, email: str, role: Role) -> User:
    return db.write_now(
        create_user, email=email, tenant_id=tenant, role=role, operator=False,
        password_hash="$argon2id$stored", now=T0,
    )  # fmt: skip


def sign_in(db: Store, user: User, at: int = T0) -> str:
    return db.write_now(start_session, user_id=user.id, address="127.0.0.1", now=at)


def changes(db: Store, tenant: str) -> list[tuple[str, dict[str, object], str | None]]:
    return [
        (str(e.type), dict(e.data), None if e.actor is None else e.actor.text())
        for e in db.read_now(list_events, tenant_id=tenant, limit=100)
        if str(e.type).startswith("user.")
    ]


def test_the_last_owner_is_neither_removed_nor_demoted(db: Store, tenant: str) -> None:
    ada = add(db, tenant, "ada@acme.example", Role.OWNER)
    bob = add(db, tenant, "bob@acme.example", Role.EDITOR)
    for change in (
        lambda c: change_role(c, user=ada, role=Role.EDITOR, now=T0, actor=OWNER),
        lambda c: remove_user(c, user=ada, now=T0, actor=OWNER),
    ):
        with pytest.raises(Conflict, match=LAST_OWNER):
            db.write_now(change)
    assert db.read_now(get_user, user_id=ada.id) == ada
    assert changes(db, tenant) == []
    # With a second owner, the first may go.
    bob = db.write_now(change_role, user=bob, role=Role.OWNER, now=T0, actor=OWNER)
    assert db.write_now(change_role, user=ada, role=Role.VIEWER, now=T0, actor=OWNER).role is (
        Role.VIEWER
    )
    assert changes(db, tenant) == [
        ("user.role_changed", {"user_id": bob.id, "email": bob.email, "role": "owner",
                               "previous_role": "editor"}, OWNER.text()),
        ("user.role_changed", {"user_id": ada.id, "email": ada.email, "role": "viewer",
                               "previous_role": "owner"}, OWNER.text()),
    ]  # fmt: skip


def test_removing_a_user_ends_their_sessions_at_once(db: Store, tenant: str) -> None:
    add(db, tenant, "ada@acme.example", Role.OWNER)
    bob = add(db, tenant, "bob@acme.example", Role.VIEWER)
    cookies = [sign_in(db, bob), sign_in(db, bob)]
    assert db.read_now(find_session, token=cookies[0], now=T0) is not None
    db.write_now(remove_user, user=bob, now=T0 + 1, actor=Actor.operator())
    assert all(db.read_now(find_session, token=c, now=T0 + 2) is None for c in cookies)
    assert db.read_now(get_user, user_id=bob.id) is None
    assert changes(db, tenant) == [
        ("user.removed", {"user_id": bob.id, "email": bob.email, "role": "viewer",
                          "sessions_ended": 2}, "operator:cli"),
    ]  # fmt: skip
    again = add(db, tenant, "bob@acme.example", Role.EDITOR)  # the email is free again
    assert again.id != bob.id


def test_a_reset_ends_sessions_and_earlier_links_and_issues_one(db: Store, tenant: str) -> None:
    bob = add(db, tenant, "bob@acme.example", Role.EDITOR)
    cookie = sign_in(db, bob)
    first = db.write_now(reset_user, user=bob, now=T0, actor=OWNER)
    second = db.write_now(reset_user, user=bob, now=T0 + 1, actor=OWNER)
    assert db.read_now(find_session, token=cookie, now=T0 + 2) is None
    assert db.read_now(setup_user, token=first.token, now=T0 + 2) is None
    assert db.read_now(setup_user, token=second.token, now=T0 + 2) == bob
    assert [(t, d["sessions_ended"]) for t, d, _ in changes(db, tenant)] == [
        ("user.reset", 1),
        ("user.reset", 0),
    ]


def test_changing_ones_password_keeps_this_session_only(db: Store, tenant: str) -> None:
    bob = add(db, tenant, "bob@acme.example", Role.EDITOR)
    here, elsewhere = sign_in(db, bob), sign_in(db, bob)
    session = db.read_now(find_session, token=here, now=T0)
    assert session is not None
    assert db.read_now(other_sessions, user_id=bob.id, keep=session.id_hash) == 1
    ended = db.write_now(
        change_password, user_id=bob.id, keep=session.id_hash, password_hash="$new", now=T0
    )
    assert ended == 1
    assert db.read_now(find_session, token=here, now=T0 + 1) is not None
    assert db.read_now(find_session, token=elsewhere, now=T0 + 1) is None
    stored = db.read_now(get_user, user_id=bob.id)
    assert stored is not None and stored.password_hash == "$new"
    sign_in(db, bob)
    assert db.write_now(end_other_sessions, user_id=bob.id, keep=session.id_hash, now=T0) == 1
    me = Actor.user(bob.id).text()
    assert changes(db, tenant) == [
        ("user.password_changed", {"user_id": bob.id, "email": bob.email, "sessions_ended": 1},
         me),
        ("user.sessions_ended", {"user_id": bob.id, "email": bob.email, "sessions_ended": 1}, me),
    ]  # fmt: skip


def test_members_show_the_last_sign_in_and_find_member_stays_in_its_tenant(
    db: Store, tenant: str
) -> None:
    ada = add(db, tenant, "ada@acme.example", Role.OWNER)
    bob = add(db, tenant, "bob@acme.example", Role.EDITOR)
    sign_in(db, ada, T0 + 5)
    sign_in(db, ada, T0 + 9)
    listed = db.read_now(members, tenant_id=tenant)
    assert [(m.user.email, m.last_sign_in_at) for m in listed] == [
        (ada.email, T0 + 9),
        (bob.email, None),
    ]
    assert db.read_now(find_member, who="BOB@acme.example", tenant=tenant) == bob
    assert db.read_now(find_member, who=bob.id) == bob
    other = db.write_now(
        create_user, email="ops@example.com", tenant_id=None, role=Role.OWNER, operator=True,
        password_hash=None, now=T0,
    )  # fmt: skip
    with pytest.raises(NotFound):
        db.read_now(find_member, who=other.email, tenant=tenant)
    with pytest.raises(Conflict, match="operator"):
        db.write_now(remove_user, user=other, now=T0, actor=OWNER)
    assert other.shown_role == "operator" and ada.shown_role == "owner"
