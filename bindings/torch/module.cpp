/* SPDX-License-Identifier: MIT */
/*
 * module.cpp - the Python extension ibcoll_torch._C: the ProcessGroupIbcoll
 * class (a subclass of torch.distributed.ProcessGroup) and a few read-only
 * facts for tests and docs. ibcoll_torch/__init__.py registers the backend.
 */
#include <Python.h>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "pg_ibcoll.hpp"

namespace py = pybind11;
using ibcoll_torch::ProcessGroupIbcoll;

/* release the GIL around a group's teardown when the caller holds it */
static void *gil_release(void)
{
	/*
	 * Not while the interpreter is finalizing: a thread other than the main
	 * one that hands back the GIL then may not take it again (Python ends it
	 * with pthread_exit, whose unwinding through a destructor is
	 * std::terminate); a group collected then keeps the GIL while it waits.
	 */
	if (!Py_IsInitialized() || !PyGILState_Check() || _Py_IsFinalizing())
		return nullptr;
	return PyEval_SaveThread();
}

static void gil_restore(void *state)
{
	PyEval_RestoreThread((PyThreadState *)state);
}

/*
 * Benchmark helpers (bench/torch_bench.py latency): @iters all-reduces of @t
 * (float32, in place) on @pg's communicator, timed in C++, so that the
 * binding's cost per call is measured without Python's: straight through
 * the C API (ibc_iallreduce + ibc_wait), and through the ProcessGroup
 * (allreduce() + Work::wait(), what torch's dispatcher calls). Collective:
 * every rank calls the same helper with the same arguments. Seconds per call.
 */
static double time_c_api(ProcessGroupIbcoll &pg, at::Tensor &t, int iters)
{
	auto t0 = std::chrono::steady_clock::now();

	for (int i = 0; i < iters; i++) {
		ibc_request_h req;
		ibc_status_t st = ibc_iallreduce(t.data_ptr(), t.data_ptr(), (size_t)t.numel(),
						 IBC_FLOAT32, IBC_SUM, pg.comm(), &req);

		if (st == IBC_OK)
			st = ibc_wait(req);
		if (st != IBC_OK)
			ibcoll_torch::throw_status("time_c_api", pg.getRank(), st);
	}
	return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
}

static double time_binding(ProcessGroupIbcoll &pg, at::Tensor &t, int iters)
{
	std::vector<at::Tensor> v{t};
	::c10d::AllreduceOptions opts;
	auto t0 = std::chrono::steady_clock::now();

	for (int i = 0; i < iters; i++)
		pg.allreduce(v, opts)->wait();
	return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
}

PYBIND11_MODULE(_C, m)
{
	m.doc() = "ibcoll as a torch.distributed backend (C++ part)";
	/* the base class must be known to pybind11 before we derive from it */
	py::module::import("torch.distributed");
	ibcoll_torch::gil_release_hook = gil_release;
	ibcoll_torch::gil_restore_hook = gil_restore;

	py::class_<ProcessGroupIbcoll, ibcoll_torch::BackendBase,
		   c10::intrusive_ptr<ProcessGroupIbcoll>>(m, "ProcessGroupIbcoll", R"(
ProcessGroupIbcoll(store, rank, size, timeout, profiling_prefix="ibcoll")

A process group over one ibcoll communicator, bootstrapped through @store
(a c10d Store shared by the ranks). @timeout (datetime.timedelta) becomes the
communicator's wait bound. Profiler events are named "<profiling_prefix>:<op>". Normally made by init_process_group("ibcoll") or
new_group(backend="ibcoll") after `import ibcoll_torch`.)")
		.def(py::init([](const c10::intrusive_ptr<::c10d::Store> &store, int rank, int size,
				 std::chrono::milliseconds timeout, const std::string &prefix) {
			     return c10::make_intrusive<ProcessGroupIbcoll>(store, rank, size,
									    timeout, prefix);
		     }),
		     py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
		     py::arg("profiling_prefix") = "ibcoll",
		     py::call_guard<py::gil_scoped_release>())
		.def_property_readonly("transport", &ProcessGroupIbcoll::transport,
				       "ibcoll's transport for this group, e.g. 'shm' or 'tcp'")
		.def_property_readonly("timeout_ms", &ProcessGroupIbcoll::timeoutMs,
				       "the communicator's wait bound in ms");

	m.def("_time_c_api", &time_c_api, py::call_guard<py::gil_scoped_release>());
	m.def("_time_binding", &time_binding, py::call_guard<py::gil_scoped_release>());
	m.def("_stop_completers", &ibcoll_torch::Completer::stop_all,
	      py::call_guard<py::gil_scoped_release>());

	int version = 0;
	ibc_get_version(&version);
	m.attr("ibcoll_version") = version;
	m.attr("torch_version_built") = TORCH_VERSION;
}
