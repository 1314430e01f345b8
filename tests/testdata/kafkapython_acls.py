"""kafka-python's KafkaAdminClient ACL calls against Berth: create, describe
(filter by principal, then MATCH on a topic), delete. Prints "ok" and
what it saw. Args: bootstrap client_id."""
import sys

from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType,
                         ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourcePatternFilter, ResourceType)

boot, client_id = sys.argv[1], sys.argv[2]
adm = KafkaAdminClient(bootstrap_servers=boot, client_id=client_id, request_timeout_ms=20000)

write = ACL(principal="User:py", host="*", operation=ACLOperation.WRITE,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(ResourceType.TOPIC, "pyt", ACLResourcePatternType.LITERAL))
read = ACL(principal="User:py", host="*", operation=ACLOperation.READ,
           permission_type=ACLPermissionType.ALLOW,
           resource_pattern=ResourcePattern(ResourceType.TOPIC, "py", ACLResourcePatternType.PREFIXED))
res = adm.create_acls([write, read])
if res["failed"]:
    print("create failed", res["failed"])
    sys.exit(1)

by_principal = ACLFilter(principal="User:py", host=None, operation=ACLOperation.ANY,
                         permission_type=ACLPermissionType.ANY,
                         resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
acls, err = adm.describe_acls(by_principal)
print("described", len(acls), err)
if len(acls) != 2:
    sys.exit(1)

match = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                  permission_type=ACLPermissionType.ANY,
                  resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, "pyt", ACLResourcePatternType.MATCH))
acls, err = adm.describe_acls(match)
print("matched", sorted(a.resource_pattern.pattern_type.name for a in acls))
if len(acls) != 2:
    sys.exit(1)

deleted = adm.delete_acls([by_principal])
n = sum(len(matches) for _filter, matches, _err in deleted)
print("deleted", n)
acls, _ = adm.describe_acls(by_principal)
if n != 2 or acls:
    print("left", acls)
    sys.exit(1)
print("ok")
