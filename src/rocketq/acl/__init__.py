"""Access control: RocketMQ ACL 1.0 request signatures (:mod:`.signing`), ``plain_acl.yml``
accounts (:mod:`.plain_acl`) and the broker-side check (:mod:`.validator`)."""

from rocketq.acl.plain_acl import AclConfigError
from rocketq.acl.signing import sign
from rocketq.acl.validator import AclValidator

__all__ = ["AclConfigError", "AclValidator", "sign"]
