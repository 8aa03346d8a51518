# SPDX-License-Identifier: MIT
"""ibcoll as a torch.distributed backend.

Importing this package registers the backend "ibcoll", so that

    import ibcoll_torch
    torch.distributed.init_process_group("ibcoll", ...)

runs every process group (and DDP) over ibcoll instead of Gloo. Import it in
every process, spawned children included, before init_process_group.
See docs/torch.md for what is supported.
"""
import atexit

import torch
import torch.distributed as _dist

from . import _C
from ._C import ProcessGroupIbcoll

__all__ = ["ProcessGroupIbcoll", "BACKEND"]

BACKEND = "ibcoll"


def _create(store, rank, size, timeout):
    return ProcessGroupIbcoll(store, rank, size, timeout)


def _register():
    if BACKEND.upper() in _dist.Backend._plugins:
        return
    # The one version branch of the Python side (the C++ side's is compat.hpp):
    # 2.1+ wants the devices the backend serves; 1.13 takes (name, fn).
    if int(torch.__version__.split(".")[0]) >= 2:
        _dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])
    else:
        _dist.Backend.register_backend(BACKEND, _create)


_register()
# finish late future callbacks while Python still lets other threads run them
atexit.register(_C._stop_completers)
