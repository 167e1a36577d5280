"""Which access control a broker runs, from its settings: none, ACL 1.0 or ACL 2.0.

* ACL 1.0: ``aclEnable=true`` (``plain_acl.yml``, :class:`~rocketq.acl.validator.AclValidator`);
* ACL 2.0: ``authenticationEnabled=true`` and/or ``authorizationEnabled=true`` (RocketMQ 5.3's keys;
  users and ACLs in the store's metadata, :class:`~rocketq.acl.auth_validator.AuthValidator`).

Both on is a configuration error (which one should decide?).  The users and ACLs are kept (and the
admin requests 3001-3010 served) when ACL 2.0 is on, or when an ``authenticationMetadataProvider``
/ ``authorizationMetadataProvider`` is configured without turning the checks on - the way to add
users before switching.  The only provider is the local one (RocketMQ's
``LocalAuthenticationMetadataProvider`` / ``LocalAuthorizationMetadataProvider``, which rocketq
keeps in JSON files instead of RocksDB); any other class name is refused by name.
"""

from __future__ import annotations

import logging
from pathlib import Path

from rocketq.acl.auth_store import AuthMetadata
from rocketq.acl.auth_validator import AuthValidator

log = logging.getLogger(__name__)

LOCAL_PROVIDERS = {"authenticationMetadataProvider": "LocalAuthenticationMetadataProvider",
                   "authorizationMetadataProvider": "LocalAuthorizationMetadataProvider"}


def acl2_enabled(settings) -> bool:
    return settings.authentication_enabled or settings.authorization_enabled


def _provider_set(settings) -> bool:
    for key, field in (("authenticationMetadataProvider", "authentication_metadata_provider"),
                       ("authorizationMetadataProvider", "authorization_metadata_provider")):
        value = getattr(settings, field)
        if value and value.rsplit(".", 1)[-1] != LOCAL_PROVIDERS[key]:
            raise ValueError(f"{key}={value}: rocketq has only the local provider "
                             f"(org.apache.rocketmq.auth...{LOCAL_PROVIDERS[key]}, kept in <storePath>/config)")
    return bool(settings.authentication_metadata_provider or settings.authorization_metadata_provider)


def access_control(settings, store_path) -> tuple[object | None, AuthMetadata | None]:
    """(the validator the broker checks requests with or None, ACL 2.0's users and ACLs or None)."""
    v2 = acl2_enabled(settings)
    if settings.acl_enable and v2:
        raise ValueError("aclEnable (ACL 1.0, plain_acl.yml) and authenticationEnabled / authorizationEnabled "
                         "(ACL 2.0) are both on: turn one off")
    metadata = None
    if _provider_set(settings) or v2:
        metadata = AuthMetadata(Path(store_path) / "config").load()
        metadata.bootstrap(settings.init_authentication_user, settings.inner_credentials)
    if settings.acl_enable:
        from rocketq.acl import AclValidator
        from rocketq.broker.credentials import acl_file_of
        return AclValidator(acl_file_of(settings.acl_file, store_path)), metadata
    if not v2:
        return None, metadata
    if settings.authorization_enabled and not settings.authentication_enabled:
        log.warning("authorizationEnabled without authenticationEnabled: a request's AccessKey is believed "
                    "without a signature (as in RocketMQ); turn authenticationEnabled on as well")
    validator = AuthValidator(metadata, cluster=settings.cluster_name,
                              authentication=settings.authentication_enabled,
                              authorization=settings.authorization_enabled)
    if validator.admin_credentials() is None:
        log.warning("ACL 2.0 is on and there is no super user: set initAuthenticationUser "
                    '{"username": ..., "password": ...} to create one, or nobody can manage users')
    return validator, metadata
