"""The plain_acl.yml the ACL tests share (remoting in tests/acl, gRPC in tests/grpc_endpoint)."""

from pathlib import Path

ACL_YAML = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: producer
    secretKey: "p-secret"
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Orders=PUB, Audit=PUB|SUB]
  - accessKey: consumer
    secretKey: "c-secret"
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    topicPerms: [Secret=DENY]
    groupPerms: [GID_C=SUB, GID_D=DENY]
  - accessKey: admin
    secretKey: "a-secret"
    admin: true
"""


def write_acl_file(tmp_path: Path, text: str = ACL_YAML) -> Path:
    """In the store's config/ directory, where the broker looks by default."""
    acl = Path(tmp_path) / "config" / "plain_acl.yml"
    acl.parent.mkdir(exist_ok=True)
    acl.write_text(text)
    return acl
