"""Buckets quantized on their device (host_lib.pytorch.device_staging) against the host
quantizer's path: the same sums bit for bit through the switch, repairs included, on CPU tensors
and, where a GPU is, on CUDA tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.quant_reference import AllreduceReference
from tests.test_transport import inputs
from topologies.local import LocalCluster, local_job

N, ELEMENTS = 3, 40_000


def both_paths(comm, arg):
    from host_lib.pytorch.device_staging import DeviceStaging

    seed, device = arg
    values = inputs(seed, comm.config.worker, 0, ELEMENTS)
    host = comm.allreduce(values, tag="host")
    host_stats = comm.last_stats
    staged = DeviceStaging(N).stage("bucket", torch.from_numpy(values).to(device),
                                    comm.scales_for("device", ELEMENTS))
    staged_sum, staged_stats = comm.allreduce_staged_async(staged, tag="device").result()
    comm.close()
    return host, staged_sum, host_stats.repairs, staged_stats.repairs


@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="needs a CUDA device")),
])
def test_device_quantized_buckets_sum_like_host_quantized_ones(tmp_path, device):
    with LocalCluster([local_job(1, N, slots=32)], tmp_path) as cluster:
        results = cluster.run_workers(both_paths, {1: [(9, device)] * N})
    want = AllreduceReference(N)([inputs(9, w, 0, ELEMENTS) for w in range(N)])
    for w in range(N):
        host, device, host_repairs, device_repairs = results[(1, w)]
        np.testing.assert_array_equal(host, want)
        np.testing.assert_array_equal(device, host)
        assert device_repairs == host_repairs > 0  # the outliers forced repairs on both paths
