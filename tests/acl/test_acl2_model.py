"""ACL 2.0's decision without a broker: RocketMQ's matching order (literal before prefix, longer prefix
first, typed before ``*``, Deny before Allow when equally specific, Custom before Default), actions,
source addresses, and the parser's refusals."""

import pytest

from rocketq.acl.auth_model import Acl, AuthError, PolicyEntry, Resource, User


def _acl(*entries, default=()):
    def entry(resource, actions, decision, ips=()):
        return PolicyEntry(Resource.parse(resource, "test"), tuple(actions.split(",")), tuple(ips), decision)
    policies = {"Custom": [entry(*e) for e in entries]}
    if default:
        policies["Default"] = [entry(*e) for e in default]
    return Acl("User:u", policies)


def _allowed(acl, kind, name, actions, ip="127.0.0.1"):
    entry = acl.decide(kind, name, tuple(actions.split(",")), ip)
    return entry is not None and entry.decision == "Allow"


def test_deny_by_default_and_an_allow_for_exactly_that():
    acl = _acl(("Topic:orders", "Pub", "Allow"))
    assert _allowed(acl, "Topic", "orders", "Pub")
    assert not _allowed(acl, "Topic", "orders", "Sub")          # another action
    assert not _allowed(acl, "Topic", "orders2", "Pub")         # another name
    assert not _allowed(acl, "Group", "orders", "Pub")          # another type


def test_deny_beats_allow_on_the_same_resource_whatever_the_order():
    for entries in ((("Topic:orders", "Pub", "Allow"), ("Topic:ord*", "Pub", "Deny"), ("Topic:orders", "Pub", "Deny")),
                    (("Topic:orders", "Pub", "Deny"), ("Topic:orders", "All", "Allow"))):
        assert not _allowed(_acl(*entries), "Topic", "orders", "Pub"), entries


def test_the_most_specific_entry_decides():
    acl = _acl(("*", "All", "Deny"), ("Topic:*", "Pub", "Deny"), ("Topic:ord*", "Pub", "Allow"),
               ("Topic:orders-secret*", "Pub", "Deny"), ("Topic:orders-secret-ok", "Pub", "Allow"))
    assert _allowed(acl, "Topic", "orders", "Pub")                   # prefix beats Topic:* and *
    assert not _allowed(acl, "Topic", "orders-secret-1", "Pub")      # the longer prefix wins
    assert _allowed(acl, "Topic", "orders-secret-ok", "Pub")         # a literal beats every prefix
    assert not _allowed(acl, "Topic", "other", "Pub")                # only Topic:* (Deny) and * match
    assert not _allowed(acl, "Group", "g", "Sub")                    # only *


def test_default_policy_only_when_no_custom_entry_matches():
    acl = _acl(("Topic:a", "Pub", "Allow"), default=[("Topic:*", "Pub,Sub", "Allow"), ("Topic:a", "Sub", "Deny")])
    assert _allowed(acl, "Topic", "a", "Pub") and _allowed(acl, "Topic", "b", "Sub")
    assert not _allowed(acl, "Topic", "a", "Sub")                    # Custom says nothing of Sub: Default's Deny


def test_any_of_the_wanted_actions_and_all():
    acl = _acl(("Topic:t", "Get", "Allow"), ("Group:g", "All", "Allow"))
    assert _allowed(acl, "Topic", "t", "Sub,Get") and not _allowed(acl, "Topic", "t", "Sub,Update")
    assert _allowed(acl, "Group", "g", "Delete")


@pytest.mark.parametrize("ips, ip, ok", [
    (["10.0.0.0/8"], "10.1.2.3", True), (["10.0.0.0/8"], "11.0.0.1", False), (["192.168.1.7"], "192.168.1.7", True),
    (["192.168.1.7"], "192.168.1.8", False), (["::1"], "::1", True), (["fe80::/16"], "10.0.0.1", False),
    ([], "203.0.113.9", True)])
def test_source_ips(ips, ip, ok):
    assert _allowed(_acl(("Topic:t", "Pub", "Allow", ips)), "Topic", "t", "Pub", ip) == ok


@pytest.mark.parametrize("body, says", [
    ({"policies": [{"entries": [{"resource": "Topic:t", "actions": ["Fly"], "decision": "Allow"}]}]}, "action"),
    ({"policies": [{"entries": [{"resource": "Topic:t", "actions": ["Any"], "decision": "Allow"}]}]}, "Any"),
    ({"policies": [{"entries": [{"resource": "Topic:t", "actions": [], "decision": "Allow"}]}]}, "actions is empty"),
    ({"policies": [{"entries": [{"resource": "Topic:t", "actions": ["Pub"]}]}]}, "decision is missing"),
    ({"policies": [{"entries": [{"resource": "Topic:t", "actions": ["Pub"], "decision": "Maybe"}]}]}, "decision"),
    ({"policies": [{"entries": [{"resource": "Queue:t", "actions": ["Pub"], "decision": "Allow"}]}]}, "resource type"),
    ({"policies": [{"entries": [{"resource": "Topic:a*b", "actions": ["Pub"], "decision": "Allow"}]}]}, "'*' only"),
    ({"policies": [{"entries": [{"resource": "Topic:../x", "actions": ["Pub"], "decision": "Allow"}]}]}, "illegal"),
    ({"policies": [{"entries": [{"resource": "Topic:t", "actions": ["Pub"], "decision": "Allow",
                                 "sourceIps": ["999.1.1.1"]}]}]}, "999.1.1.1"),
    ({"policies": [{"policyType": "Weird", "entries": []}]}, "policyType"),
    ({"policies": []}, "policies are empty"),
    ({"subject": "Admin:x", "policies": [{"entries": []}]}, "User:<username>"),
])
def test_bad_acl_bodies_are_named(body, says):
    with pytest.raises(AuthError, match=None) as info:
        Acl.from_json(body, "User:u", "AclInfo")
    assert says in str(info.value), info.value


@pytest.mark.parametrize("data, says", [
    ({"username": "a b", "password": "x"}, "username"), ({"username": "u"}, "password is blank"),
    ({"username": "u", "password": "x\n"}, "control"), ({"username": "u", "password": "x", "userType": "Root"},
                                                         "userType"),
    ({"username": "u" * 200, "password": "x"}, "1-128")])
def test_bad_users_are_named(data, says):
    with pytest.raises(AuthError) as info:
        User.from_json(data, "UserInfo")
    assert says in str(info.value), info.value


def test_merge_replaces_an_entry_of_the_same_resource_and_keeps_the_rest():
    acl = _acl(("Topic:a", "Pub", "Allow"), ("Topic:b", "Sub", "Allow"))
    acl.merge(_acl(("Topic:a", "Sub", "Deny"), ("Group:g", "Sub", "Allow")))
    assert [(e.resource.key, e.actions, e.decision) for e in acl.policies["Custom"]] == [
        ("Topic:a", ("Sub",), "Deny"), ("Topic:b", ("Sub",), "Allow"), ("Group:g", ("Sub",), "Allow")]
    assert Acl.from_json(acl.to_json(), None, "round trip").to_json() == acl.to_json()
