"""An Envoy-side client of the rate-limit service, written against grpcio and the
protos the gRPC project publishes (xds-protos): nothing of portero's.

Usage: rls_client.py HOST:PORT — runs the scenario below and prints one JSON line a
call: {"overall": "OK"|"OVER_LIMIT", "statuses": [[code, remaining, requests_per_unit,
unit, seconds_until_reset]], "headers": [[name, value]]} or {"error": STATUS_CODE_NAME}.
"""

import json
import sys

import grpc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
from google.protobuf import wrappers_pb2


def descriptor(entries, hits=None):
    d = ratelimit_pb2.RateLimitDescriptor(
        entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key=k, value=v) for k, v in entries]
    )
    if hits is not None:
        d.hits_addend.CopyFrom(wrappers_pb2.UInt64Value(value=hits))
    return d


def call(stub, domain, descriptors, hits_addend=0):
    request = rls_pb2.RateLimitRequest(domain=domain, descriptors=descriptors, hits_addend=hits_addend)
    try:
        response = stub.ShouldRateLimit(request, timeout=10)
    except grpc.RpcError as e:
        print(json.dumps({"error": e.code().name}), flush=True)
        return
    code = rls_pb2.RateLimitResponse.Code.Name
    unit = rls_pb2.RateLimitResponse.RateLimit.Unit.Name
    statuses = [
        [
            code(s.code),
            s.limit_remaining,
            s.current_limit.requests_per_unit if s.HasField("current_limit") else None,
            unit(s.current_limit.unit) if s.HasField("current_limit") else None,
            s.duration_until_reset.seconds if s.HasField("duration_until_reset") else None,
        ]
        for s in response.statuses
    ]
    headers = [[h.key, h.value] for h in response.response_headers_to_add]
    print(json.dumps({"overall": code(response.overall_code), "statuses": statuses, "headers": headers}), flush=True)


def main():
    stub = rls_pb2_grpc.RateLimitServiceStub(grpc.insecure_channel(sys.argv[1]))
    alice = [descriptor([("user", "alice")])]
    for _ in range(4):
        call(stub, "rl", alice)
    call(stub, "", alice)
    call(stub, "rl", [descriptor([("user", "many")]) for _ in range(10_000)])
    call(stub, "rl", [descriptor([("user", "bob")], hits=2**40)])
    call(stub, "rl", [descriptor([("user", "bob")])])
    call(stub, "rl", [descriptor([("user", "carol")])], hits_addend=2)
    call(stub, "rl", [descriptor([("user", "carol")], hits=0)])
    call(stub, "elsewhere", alice)
    call(stub, "rl", [descriptor([("user", "dave")]), descriptor([("tenant", "acme")])])
    call(stub, "rl", [descriptor([("user", "erin")]), descriptor([("tenant", "acme")])])


main()
