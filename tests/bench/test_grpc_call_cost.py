"""`python -m rocketq.bench.grpc_call_cost --tls`: a real ``rocketq serve`` per transport with tlsMode=enforcing and
a throwaway certificate, Heartbeat calls over a TLS channel, the server's CPU per call measured."""

import shutil

import pytest

from rocketq.bench import grpc_call_cost


@pytest.mark.skipif(shutil.which("openssl") is None, reason="--tls makes its certificate with the openssl command")
def test_call_cost_over_tls(capsys):
    # CPU times come from /proc in 10 ms ticks: 200 calls (~25 ms of the native thread) read as 0 once
    # under load; 1,000 give every counter several ticks
    medians = grpc_call_cost.run(calls=1000, window=8, runs=1, transports=("grpcio", "native"), tls=True)
    rows = [line for line in capsys.readouterr().out.splitlines() if '"tls": true' in line]
    assert len(rows) == 2                                    # one per transport, each a TLS run
    for t in ("grpcio", "native"):
        assert medians[t]["server_cpu_us_per_call"] > 0 and medians[t]["calls_per_s"] > 0
    assert medians["native"]["of_which_native_http2_thread_us"] > 0     # the native transport served the TLS
