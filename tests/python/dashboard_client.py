"""An independent gRPC client of gwhub's Dashboard: Python's grpcio, with
nothing but server reflection (no .proto files, no generated code).

Discovers gwhub.v1.Dashboard through grpc.reflection.v1alpha (what
grpcio-reflection speaks), checks that grpc.reflection.v1 answers the same,
builds the request messages from the reflected descriptors, calls
ListGateways and WatchGateways, and checks health with the standard health
client. Exits non-zero, saying why, on any failure.

Usage: python dashboard_client.py HOST:PORT EXPECTED_GATEWAY EXPECTED_CLUSTERS
"""

import sys
import time

import grpc
from google.protobuf import descriptor_pool, message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

SERVICE = "gwhub.v1.Dashboard"


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def health(channel):
    stub = health_pb2_grpc.HealthStub(channel)
    for service in ("", SERVICE):
        got = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        if got.status != health_pb2.HealthCheckResponse.SERVING:
            fail(f"health of {service!r}: {got.status}")
    print("health: SERVING")


def reflection_v1_lists(channel):
    """grpc.reflection.v1 speaks the same messages as v1alpha."""
    call = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    answers = call(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
    names = [s.name for a in answers for s in a.list_services_response.service]
    return names


def main():
    if len(sys.argv) != 4:
        fail(__doc__)
    target, gateway, clusters = sys.argv[1], sys.argv[2], int(sys.argv[3])
    channel = grpc.insecure_channel(target)
    grpc.channel_ready_future(channel).result(timeout=30)
    health(channel)

    db = ProtoReflectionDescriptorDatabase(channel)
    services = list(db.get_services())
    if SERVICE not in services:
        fail(f"reflection v1alpha lists {services}, not {SERVICE}")
    v1 = reflection_v1_lists(channel)
    if SERVICE not in v1:
        fail(f"reflection v1 lists {v1}, not {SERVICE}")
    print(f"reflection v1alpha and v1 list {SERVICE}")

    pool = descriptor_pool.DescriptorPool(db)
    svc = pool.FindServiceByName(SERVICE)

    def method(name):
        m = svc.FindMethodByName(name)
        req = message_factory.GetMessageClass(m.input_type)
        resp = message_factory.GetMessageClass(m.output_type)
        return m, req, resp

    _, list_req, list_resp = method("ListGateways")
    list_gateways = channel.unary_unary(
        f"/{SERVICE}/ListGateways",
        request_serializer=list_req.SerializeToString,
        response_deserializer=list_resp.FromString,
    )
    deadline = time.monotonic() + 60
    while True:
        answer = list_gateways(list_req(), timeout=10)
        found = [
            g for g in answer.gateways if f"{g.namespace}/{g.name}" == gateway
        ]
        if found and len(found[0].clusters) == clusters:
            break
        if time.monotonic() > deadline:
            fail(f"ListGateways never showed {gateway} with {clusters} clusters: {answer}")
        time.sleep(0.5)
    g = found[0]
    types = [c.type for c in g.status.conditions]
    if "kuadrant.io/MultiClusterAggregated" not in types:
        fail(f"{gateway} has no aggregated condition: {types}")
    print(f"ListGateways: {gateway} from {sorted(g.clusters)}, conditions {types}")

    m, watch_req, watch_resp = method("WatchGateways")
    if not m.server_streaming:
        fail("WatchGateways is not server-streaming")
    watch = channel.unary_stream(
        f"/{SERVICE}/WatchGateways",
        request_serializer=watch_req.SerializeToString,
        response_deserializer=watch_resp.FromString,
    )
    stream = watch(watch_req(), timeout=60)
    first = next(stream)
    if not first.snapshot or not any(
        f"{u.namespace}/{u.name}" == gateway for u in first.upserted
    ):
        fail(f"the first WatchGateways message is not a snapshot with {gateway}: {first}")
    change = next(stream)
    if change.snapshot or not (change.upserted or change.deleted):
        fail(f"the second WatchGateways message is no change: {change}")
    stream.cancel()
    print(
        f"WatchGateways: snapshot of {len(first.upserted)}, then a change to "
        f"{[f'{u.namespace}/{u.name}' for u in change.upserted]}"
    )
    print("OK")


if __name__ == "__main__":
    main()
