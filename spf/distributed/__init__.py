"""Distributed runs of compiled kernels on a Dask cluster (``dask.distributed``): the
partition from the kernel's own dependence analysis (:mod:`.partition`), the call on
in-memory operands (:mod:`.kernel`), on ``dask.array`` operands with halo exchange and 1-D or
2-D blocks (:mod:`.halo`, :mod:`.arrays`), and iterative solvers written on top
(:mod:`.solvers`)."""
from __future__ import annotations

from .halo import HaloPlan, plan_blocks
from .kernel import DistributedKernel, Parts
from .partition import Partition, concatenate_storage, cut, partition_of

__all__ = ["DistributedKernel", "HaloPlan", "Partition", "Parts", "concatenate_storage", "cut",
           "partition_of", "plan_blocks"]
