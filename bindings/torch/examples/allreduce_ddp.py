#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""allreduce_ddp.py - the smallest use of the ibcoll backend: one all_reduce
and a few DDP steps of a linear model, under any launcher.

  mp.spawn:  python3 allreduce_ddp.py --spawn 4
  mpirun:    mpirun -np 4 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 python3 allreduce_ddp.py
  torchrun:  python3 -m torch.distributed.run --nproc_per_node 4 --redirects 1 --tee 1 \
                 allreduce_ddp.py
(PYTHONPATH=<build>/bindings/torch/pkg before `make install`.)
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

import ibcoll_torch  # noqa: F401 - registers the "ibcoll" backend


def main(rank, world):
    dist.init_process_group("ibcoll", rank=rank, world_size=world)   # env:// rendezvous
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [world * (world + 1) / 2] * 4, t
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(16, 8) + rank).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print("ibcoll over %s: all_reduce %s, DDP loss %.4f" %
              (dist.group.WORLD.transport, t.tolist(), loss.item()))
    dist.destroy_process_group()


def spawned(rank, world):
    main(rank, world)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--spawn":
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        mp.spawn(spawned, args=(int(sys.argv[2]),), nprocs=int(sys.argv[2]))
    else:
        env = os.environ
        main(int(env.get("RANK", env.get("OMPI_COMM_WORLD_RANK", 0))),
             int(env.get("WORLD_SIZE", env.get("OMPI_COMM_WORLD_SIZE", 1))))
