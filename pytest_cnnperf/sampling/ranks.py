"""Data-parallel train steps: one sample process per rank, joined through ``torch.distributed``.

Each rank process replays the test up to the benchmark call, joins the process group (NCCL with
one GPU a rank on CUDA, Gloo on the CPU) through a file rendezvous (no port to pick or leak),
wraps the model in ``DistributedDataParallel`` and times the step. Ranks must run the same
number of steps, so warm-up and timed steps are fixed counts here rather than "until steady".
The sample's step time is the slowest rank's; rank 0 then times the same step alone, without
DDP, for the scaling efficiency.
"""

from __future__ import annotations

import dataclasses
import datetime
import gc
import os
import time
from typing import TYPE_CHECKING, Any

from ..measuring.timing import TimingPolicy
from .messages import ChildReport, Job, TakenSample, describe_error

if TYPE_CHECKING:
    from .manager import Target

#: how long a rank waits for the others before the collective gives up
TIMEOUT = datetime.timedelta(minutes=5)


def lockstep(policy: TimingPolicy) -> TimingPolicy:
    """A policy that runs the same number of steps on every rank."""
    warmup = max(policy.warmup_min_steps, 3)
    return dataclasses.replace(
        policy,
        warmup_min_steps=warmup,
        warmup_max_steps=warmup,
        warmup_max_s=float("inf"),
        warmup_tolerance=-1.0,
        max_steps=policy.min_steps,
    )


def rank_device(base: Any, rank: int) -> Any:
    import torch

    return torch.device("cuda", rank) if base.type == "cuda" else torch.device("cpu")


def run_rank(job: Job, target: Target, base_device: Any) -> ChildReport:
    """Be rank ``job.rank`` of ``job.world_size`` for one sample."""
    import torch
    import torch.distributed as dist

    from ..measuring.sample import clock_for, take_sample
    from ..measuring.timing import time_steps

    device = rank_device(base_device, job.rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:  # the ranks share the CPU's cores, as torchrun arranges it
        torch.set_num_threads(max(1, torch.get_num_threads() // job.world_size))
    plan = dataclasses.replace(target.plan, timing=lockstep(target.plan.timing))
    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo",
        init_method=f"file://{job.rendezvous}",
        rank=job.rank,
        world_size=job.world_size,
        timeout=TIMEOUT,
        # NCCL's communicator on this rank's GPU, never one it guesses
        **({"device_id": device} if device.type == "cuda" else {}),
    )
    try:
        # the other ranks hold contexts on their own GPUs, and perhaps on this one: not others
        pids: list[int] = [0] * job.world_size
        dist.all_gather_object(pids, os.getpid())
        workload = target.build(device, job.world_size)
        sample, environment = take_sample(
            workload,
            device,
            plan,
            memory_pass=job.memory,
            in_process=False,
            ignore_pids=frozenset({job.parent_pid, *pids}),
            count_pass=job.counted,
        )
        step_times: list[float] = [0.0] * job.world_size
        dist.all_gather_object(step_times, sample.step_time_s)
        # DDP's reducer holds the group: freed while every rank still does (at torch 2.5 a gloo
        # group destroyed after its peer has gone can wait forever for its threads)
        del workload
        gc.collect()
        dist.barrier()
    except Exception as exc:
        # stamped before leaving the group: the other ranks fail when it is gone, later
        return ChildReport(error=describe_error(exc), failed_at=time.time())
    finally:
        dist.destroy_process_group()
    if job.rank != 0:
        return ChildReport(taken=TakenSample(sample, environment))
    alone = time_steps(
        target.build(device, 1).phases,
        clock_for(device),
        plan.timing,
        per_step_wall=device.type != "cuda",
    )
    sample = dataclasses.replace(
        sample, step_time_s=max(step_times), single_rank_step_s=alone.step_time_s
    )
    return ChildReport(taken=TakenSample(sample, environment))
