"""Buckets quantized on their device (host_lib.device_staging) against the host quantizer's path:
the same sums bit for bit through the switch, repairs included. On CPU tensors here; the CUDA case
runs where a GPU is (test_ddp_hook's cuda parameter)."""

from __future__ import annotations

import numpy as np
import torch

from tests.quant_reference import AllreduceReference
from tests.test_transport import inputs
from topologies.local import LocalCluster, local_job

N, ELEMENTS = 3, 40_000


def both_paths(comm, seed):
    from host_lib.device_staging import DeviceStaging

    values = inputs(seed, comm.config.worker, 0, ELEMENTS)
    host = comm.allreduce(values, tag="host")
    host_stats = comm.last_stats
    staged = DeviceStaging(N).stage("bucket", torch.from_numpy(values),
                                    comm.scales_for("device", ELEMENTS))
    device, device_stats = comm.allreduce_staged_async(staged, tag="device").result()
    comm.close()
    return host, device, host_stats.repairs, device_stats.repairs


def test_device_quantized_buckets_sum_like_host_quantized_ones(tmp_path):
    with LocalCluster([local_job(1, N, slots=32)], tmp_path) as cluster:
        results = cluster.run_workers(both_paths, {1: [9] * N})
    want = AllreduceReference(N)([inputs(9, w, 0, ELEMENTS) for w in range(N)])
    for w in range(N):
        host, device, host_repairs, device_repairs = results[(1, w)]
        np.testing.assert_array_equal(host, want)
        np.testing.assert_array_equal(device, host)
        assert device_repairs == host_repairs > 0  # the outliers forced repairs on both paths
