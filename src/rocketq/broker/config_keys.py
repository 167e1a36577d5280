"""The broker's settings by the names RocketMQ gives them (``broker.conf`` keys).

``BROKER_KEYS`` maps a RocketMQ (or rocketq) key to the :class:`~rocketq.broker.broker.BrokerSettings`
field and a converter from the value as written (``MS_TO_S``: milliseconds in the file, seconds in
the field).  The configuration loader (:mod:`rocketq.server.config`) reads files with it, and
GET / UPDATE_BROKER_CONFIG (:mod:`rocketq.broker.runtime_config`) speak it on the wire.
"""

from __future__ import annotations

MS_TO_S = ("ms", lambda v: int(v) / 1000)
BROKER_KEYS: dict[str, tuple[str, object]] = {
    "brokerClusterName": ("cluster_name", None), "brokerName": ("broker_name", None),
    "brokerId": ("broker_id", None), "brokerIP1": ("announce_host", None), "listenPort": ("port", None),
    "bindAddress": ("host", None), "namesrvAddr": ("namesrv_addr", None),
    "autoCreateTopicEnable": ("auto_create_topic", None), "defaultTopicQueueNums": ("default_topic_queue_nums", None),
    "transactionCheckInterval": ("transaction_check_interval_s", MS_TO_S),
    "transactionTimeOut": ("transaction_timeout_s", MS_TO_S), "transactionCheckMax": ("transaction_check_max", None),
    "brokerFastFailureEnable": ("fast_failure", None), "waitTimeMillsInSendQueue": ("wait_in_send_queue_ms", None),
    "sendThreadPoolQueueCapacity": ("send_queue_capacity", None),
    "aclEnable": ("acl_enable", None), "aclFile": ("acl_file", None),
    "innerClientAuthenticationCredentials": ("inner_credentials", None),
    "authenticationEnabled": ("authentication_enabled", None), "authorizationEnabled": ("authorization_enabled", None),
    "initAuthenticationUser": ("init_authentication_user", None),
    "authenticationMetadataProvider": ("authentication_metadata_provider", None),
    "authorizationMetadataProvider": ("authorization_metadata_provider", None),
    "validateSystemTopicWhenUpdateTopic": ("validate_system_topic", None),
    "brokerRole": ("broker_role", None), "haListenPort": ("ha_listen_port", None),
    "haMasterAddress": ("ha_master_address", None), "slaveReadEnable": ("slave_read_enable", None),
    "enableSlaveActingMaster": ("slave_acting_master", None),
    "whichBrokerWhenConsumeSlowly": ("which_broker_when_consume_slowly", None),
    "accessMessageInMemoryMaxRatio": ("access_message_in_memory_max_ratio", None),
    "enableControllerMode": ("controller_mode", None), "controllerAddr": ("controller_addr", None),
    "controllerMasterRole": ("controller_master_role", None), "controllerLeaseEnable": ("controller_lease", None),
    "tls.enable": ("tls_enable", None), "tls.client.trustCertPath": ("tls_trust_cert_path", None),
    "tls.client.certPath": ("tls_client_cert_path", None), "tls.client.keyPath": ("tls_client_key_path", None),
    "timerWheelEnable": ("timer_wheel_enable", None), "timerMaxDelaySec": ("timer_max_delay_sec", None),
    "enablePropertyFilter": ("enable_property_filter", None),
    "maxFilterMessageSize": ("max_filter_message_size", None),
    "enableMixedMessageType": ("enable_mixed_message_type", None),
    "defaultMessageRequestMode": ("default_message_request_mode", None),
    "defaultPopShareQueueNum": ("default_pop_share_queue_num", None),
    "metricsExporterType": ("metrics_exporter_type", None), "metricsPromExporterPort": ("metrics_port", None),
    "metricsPromExporterHost": ("metrics_host", None), "traceTopicEnable": ("trace_topic_enable", None),
    "msgTraceTopicName": ("trace_topic_name", None), "grpcTransport": ("grpc_transport", None),
}
