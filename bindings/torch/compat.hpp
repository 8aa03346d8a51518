/* SPDX-License-Identifier: MIT */
/*
 * compat.hpp - everything that depends on the PyTorch version, in one place.
 *
 * Built and tested: PyTorch 1.13 (Debian 12's python3-torch / libtorch-dev),
 * where a third-party backend subclasses c10d::ProcessGroup and Python's
 * Backend.register_backend(name, fn) calls fn(store, rank, size, timeout).
 *
 * PyTorch 2.x (not testable here; what a port needs, kept next to the code
 * it would change):
 *   - the base class is c10d::Backend (torch/csrc/distributed/c10d/Backend.hpp;
 *     1.13 ships that header too but does not use it for plugins); the
 *     Python class must derive from torch._C._distributed_c10d.Backend;
 *   - registration is register_backend("ibcoll", fn, devices=["cpu"]) (2.1+),
 *     and torch wraps the returned Backend in a ProcessGroup itself
 *     (ibcoll_torch/__init__.py holds that branch);
 *   - startCoalescing()/endCoalescing(): 2.1 changed endCoalescing to
 *     `c10::intrusive_ptr<Work> endCoalescing()` returning one Work for the
 *     batch (IBCT_END_COALESCING_* below);
 *   - new virtuals worth overriding: allgather_into_tensor_coalesced,
 *     reduce_scatter_tensor_coalesced, and (2.2+) supportsSplitting();
 *     AllreduceOptions gained sparseIndices (we refuse sparse tensors);
 *   - Work moved nowhere (c10d::Work, Work.hpp), but its constructor keeps
 *     the same (rank, OpType, profilingTitle, inputs) arguments.
 */
#ifndef IBCOLL_TORCH_COMPAT_HPP
#define IBCOLL_TORCH_COMPAT_HPP

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace ibcoll_torch {

#if TORCH_VERSION_MAJOR >= 2
/* untested: see the header comment */
using BackendBase = ::c10d::Backend;
#define IBCT_TORCH_2X 1
#else
using BackendBase = ::c10d::ProcessGroup;
#define IBCT_TORCH_2X 0
#endif

} // namespace ibcoll_torch

#endif /* IBCOLL_TORCH_COMPAT_HPP */
