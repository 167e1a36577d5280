"""``rocketq user create|update|delete|get|list`` and ``rocketq acl create|update|delete|get|list``:
ACL 2.0's users and ACLs on running brokers (the admin requests 3001-3010, as mqadmin's createUser ...
listAcl).  Changes go to every broker of the cluster (``--cluster``; default every registered broker)
or to ``--broker ADDR``; the signing account (``--access-key`` / ``--secret-key``) needs Update on the
cluster, or is a super user.

``acl create User:alice --resource Topic:orders --resource 'Group:app-*' --action Pub --action Sub
--decision Allow [--source-ip 10.0.0.0/8]`` writes one entry per resource; create and update both merge
into the subject's ACL, as in RocketMQ.
"""

from __future__ import annotations

import click
from rich.markup import escape

from rocketq.cli.admin_cmds import _emit, _table, _with_admin, json_option
from rocketq.cli.client_options import call, client_options

_where = [click.option("--cluster", help="Every broker of this cluster (default: every registered broker)."),
          click.option("--broker", "broker_addr", help="Only this broker address.")]


def where_options(fn):
    for option in reversed(_where):
        fn = option(fn)
    return fn


def _done(what: str, addrs: list[str]) -> None:
    click.echo(f"{what} on {', '.join(addrs)}")


@click.group()
def user() -> None:
    """ACL 2.0 users: create, update, delete, get, list."""


@user.command("create")
@click.argument("username")
@click.option("--password", required=True, help="The user's password (its requests' signing key).")
@click.option("--type", "user_type", type=click.Choice(["Normal", "Super"], case_sensitive=False),
              help="Normal (default) or Super (checked by no ACL; only a super user may create one).")
@where_options
@client_options
def user_create(username, password, user_type, cluster, broker_addr, access) -> None:
    """Create user USERNAME."""
    addrs = call(access, _with_admin(access, lambda a: a.auth.create_user(
        username, password, user_type, broker_addr=broker_addr, cluster=cluster)))
    _done(f"user {username} created", addrs)


@user.command("update")
@click.argument("username")
@click.option("--password", help="A new password.")
@click.option("--type", "user_type", type=click.Choice(["Normal", "Super"], case_sensitive=False))
@click.option("--status", "user_status", type=click.Choice(["enable", "disable"], case_sensitive=False),
              help="disable: the user's requests are refused until it is enabled again.")
@where_options
@client_options
def user_update(username, password, user_type, user_status, cluster, broker_addr, access) -> None:
    """Change USERNAME's password, type or status (what is not given stays)."""
    if not (password or user_type or user_status):
        raise click.UsageError("give at least one of --password, --type, --status")
    addrs = call(access, _with_admin(access, lambda a: a.auth.update_user(
        username, password=password, user_type=user_type, user_status=user_status, broker_addr=broker_addr,
        cluster=cluster)))
    _done(f"user {username} updated", addrs)


@user.command("delete")
@click.argument("username")
@where_options
@client_options
def user_delete(username, cluster, broker_addr, access) -> None:
    """Delete USERNAME and its ACL."""
    addrs = call(access, _with_admin(access, lambda a: a.auth.delete_user(username, broker_addr=broker_addr,
                                                                          cluster=cluster)))
    _done(f"user {username} deleted", addrs)


def _user_table(title: str, users: list[dict]):
    t = _table(title, "username", "type", "status")
    for u in users:
        t.add_row(escape(u.get("username", "")), u.get("userType", ""), u.get("userStatus", ""))
    return t


def _without_password(u: dict) -> dict:
    return {k: v for k, v in u.items() if k != "password"}


@user.command("get")
@click.argument("username")
@where_options
@json_option
@client_options
def user_get(username, cluster, broker_addr, access, as_json) -> None:
    """Show USERNAME (never its password)."""
    found = call(access, _with_admin(access, lambda a: a.auth.get_user(username, broker_addr=broker_addr,
                                                                       cluster=cluster)))
    if found is None:
        raise click.ClickException(f"no user {username}")
    _emit(as_json, _without_password(found), _user_table(f"user {escape(username)}", [found]))


@user.command("list")
@click.option("--filter", "filter_text", help="Only usernames containing this.")
@where_options
@json_option
@client_options
def user_list(filter_text, cluster, broker_addr, access, as_json) -> None:
    """List the users (never their passwords)."""
    users = call(access, _with_admin(access, lambda a: a.auth.list_users(filter_text, broker_addr=broker_addr,
                                                                         cluster=cluster)))
    _emit(as_json, [_without_password(u) for u in users], _user_table("users", users))


@click.group()
def acl() -> None:
    """ACL 2.0 policies of users: create, update, delete, get, list."""


def _put(update: bool):
    @click.argument("subject")
    @click.option("--resource", "-r", "resources", multiple=True, required=True,
                  help="Topic:NAME, Topic:PREFIX*, Topic:*, Group:..., Cluster:NAME, Namespace:NAME or * "
                       "(repeat for several).")
    @click.option("--action", "-a", "actions", multiple=True, required=True,
                  help="Pub, Sub, Create, Update, Delete, Get, List or All (repeat for several).")
    @click.option("--decision", "-d", type=click.Choice(["Allow", "Deny"], case_sensitive=False), required=True)
    @click.option("--source-ip", "-i", "source_ips", multiple=True, help="An address or CIDR block the entry "
                  "is limited to (repeat for several; default: anywhere).")
    @click.option("--policy-type", type=click.Choice(["Custom", "Default"], case_sensitive=False))
    @where_options
    @client_options
    def command(subject, resources, actions, decision, source_ips, policy_type, cluster, broker_addr, access):
        addrs = call(access, _with_admin(access, lambda a: a.auth.put_acl(
            subject, list(resources), [x for a_ in actions for x in a_.split(",") if x],
            decision, source_ips=list(source_ips), policy_type=policy_type, update=update,
            broker_addr=broker_addr, cluster=cluster)))
        _done(f"ACL of {subject} {'updated' if update else 'created'}", addrs)
    command.__doc__ = (f"{'Update' if update else 'Create'} entries of SUBJECT's (User:NAME) ACL: one per "
                       "resource, merged into what it has.")
    return command


acl.command("create")(_put(False))
acl.command("update")(_put(True))


@acl.command("delete")
@click.argument("subject")
@click.option("--resource", "-r", help="Only this resource's entry (default: the whole ACL).")
@click.option("--policy-type", type=click.Choice(["Custom", "Default"], case_sensitive=False))
@where_options
@client_options
def acl_delete(subject, resource, policy_type, cluster, broker_addr, access) -> None:
    """Delete SUBJECT's ACL, or one resource's entry of it."""
    addrs = call(access, _with_admin(access, lambda a: a.auth.delete_acl(
        subject, resource, policy_type=policy_type, broker_addr=broker_addr, cluster=cluster)))
    _done(f"ACL of {subject} {'entry ' + resource + ' ' if resource else ''}deleted", addrs)


def _acl_table(title: str, acls: list[dict]):
    t = _table(title, "subject", "policy", "resource", "actions", "source ips", "decision")
    for a in acls:
        for p in a.get("policies") or ():
            for e in p.get("entries") or ():
                t.add_row(escape(a.get("subject", "")), p.get("policyType", ""), escape(e.get("resource", "")),
                          ",".join(e.get("actions") or ()), ",".join(e.get("sourceIps") or ()) or "*",
                          e.get("decision", ""))
    return t


@acl.command("get")
@click.argument("subject")
@where_options
@json_option
@client_options
def acl_get(subject, cluster, broker_addr, access, as_json) -> None:
    """Show SUBJECT's ACL."""
    found = call(access, _with_admin(access, lambda a: a.auth.get_acl(subject, broker_addr=broker_addr,
                                                                      cluster=cluster)))
    if found is None:
        raise click.ClickException(f"{subject} has no ACL")
    _emit(as_json, found, _acl_table(f"ACL of {escape(subject)}", [found]))


@acl.command("list")
@click.option("--subject-filter", help="Only subjects containing this.")
@click.option("--resource-filter", help="Only entries whose resource contains this.")
@where_options
@json_option
@client_options
def acl_list(subject_filter, resource_filter, cluster, broker_addr, access, as_json) -> None:
    """List the ACLs."""
    acls = call(access, _with_admin(access, lambda a: a.auth.list_acls(
        subject_filter, resource_filter, broker_addr=broker_addr, cluster=cluster)))
    _emit(as_json, acls, _acl_table("ACLs", acls))
