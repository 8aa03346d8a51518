/* SPDX-License-Identifier: MIT */
/*
 * pg_ibcoll.hpp - ibcoll as a torch.distributed process group: two ibcoll
 * communicators per process group (collectives; sends and receives), each
 * operation posted as ibc_i*() and handed back as a Work over its request.
 * Relies only on include/ibcoll.h and on the PyTorch version glue in
 * compat.hpp.
 *
 * Threads: operations are posted under the group's issue lock (ibcoll takes
 * one call at a time per communicator); a request is waited on by exactly
 * one thread, the first that needs its end (Work::wait, or the group's
 * completer thread for futures and for Works dropped unfinished). The
 * completer waits in issue order, which is ibcoll's completion order.
 */
#ifndef IBCOLL_TORCH_PG_IBCOLL_HPP
#define IBCOLL_TORCH_PG_IBCOLL_HPP

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ibcoll.h"

#include "compat.hpp"

namespace ibcoll_torch {

/*
 * struct OpState - one posted operation. Shared by its Work, the completer
 * and the group's list of live operations, so that whoever comes last frees
 * it and no buffer goes away while the library still uses it.
 */
struct OpState {
	std::mutex mu;
	std::condition_variable cv;
	ibc_request_h req = nullptr;       /* outstanding; NULL once waited for */
	bool claimed = false;              /* a thread is inside ibc_wait() */
	bool done = false;
	std::exception_ptr error;          /* set when done and failed */
	std::vector<at::Tensor> keep;      /* buffers the library reads or writes */
	std::vector<at::Tensor> outputs;   /* Work::result() and the future's value */
	std::function<void()> on_success;  /* e.g. copy out of a staging buffer */
	std::function<void()> record_end;  /* profiler range end, or empty */
	c10::intrusive_ptr<c10::ivalue::Future> fut;  /* from getFuture(), or null */
	std::string what;                  /* "allreduce", ... for messages */
	int rank = -1;                     /* this process's rank in the group */
	int source = -1;                   /* sender of a receive, -1 if unknown */
	/* the group's flag: some operation of it failed (its error was raised or is held) */
	std::shared_ptr<std::atomic<bool>> group_failed;

	/* blocks until the request ends (bounded by the communicator's timeout) */
	void complete();
	/* nonblocking: true when done (finishing it if the request just ended) */
	bool test();
	/*
	 * The completer's two halves of complete(): claim() returns false when
	 * the op is done or another thread waits for it (that thread finishes
	 * it); wait_claimed() waits for a claimed request, finish() ends it.
	 */
	bool claim();
	ibc_status_t wait_claimed(std::string *text);
	void finish(ibc_status_t st, const std::string &text);
};

/*
 * class Completer - the threads of a group that wait for operations nobody
 * else waits for: those whose future was asked for, and Works dropped
 * before they finished. One of them at a time waits for requests, in issue
 * order (the leader); before it finishes an op, which runs the future's
 * callbacks, it hands the waiting to an idle thread, or a new one when
 * every other is inside a callback: a callback may wait for another op's
 * future of the same group (PowerSGD's hook does), which a single thread
 * could never complete. Started on first use; the threads stay until the
 * group goes (as many as callbacks were ever nested, plus one).
 */
class Completer {
public:
	Completer();
	~Completer();
	Completer(const Completer &) = delete;
	Completer &operator=(const Completer &) = delete;

	void push(std::shared_ptr<OpState> op);
	/* completes everything queued, then ends the threads */
	void stop();
	/*
	 * stop() on every group's completer of the process: at interpreter exit
	 * (atexit), before Python refuses the GIL to other threads, since a late
	 * future callback on a completer thread would then end the process
	 * (pthread_exit through C++ frames: std::terminate)
	 */
	static void stop_all();

	struct Queue;                   /* shared with the threads, which may outlive us */

private:
	std::shared_ptr<Queue> q_;
};

/* class WorkIbcoll - a c10d::Work over one OpState */
class WorkIbcoll : public ::c10d::Work {
public:
	WorkIbcoll(std::shared_ptr<OpState> op, std::shared_ptr<Completer> completer, int rank,
		   ::c10d::OpType type, const char *profiling_title,
		   const c10::optional<std::vector<at::Tensor>> &inputs);
	~WorkIbcoll() override;

	bool isCompleted() override;
	bool isSuccess() const override;
	std::exception_ptr exception() const override;
	int sourceRank() const override;
	std::vector<at::Tensor> result() override;
	void synchronize() override;
	bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
	c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

private:
	std::shared_ptr<OpState> op_;
	std::shared_ptr<Completer> completer_;
};

/* how a tensor is handed to the library: element type and count */
struct Elems {
	ibc_dtype_t dtype;
	size_t count;
};

/* how a reduction is handed to the library */
struct Reduction {
	ibc_dtype_t dtype;
	size_t count;
	ibc_redop_t op;
};

/* "<prefix>:<name>", a pointer valid for the life of the process (pg_ibcoll.cpp) */
const char *profiling_title(const std::string &prefix, const char *name);

/* pure mappings, defined in dtype.cpp; they throw std::runtime_error naming @opname */
Elems move_elems(const at::Tensor &t);
Reduction reduce_elems(const char *opname, const at::Tensor &t, const ::c10d::ReduceOp &rop);
/*
 * the layouts check_tensor() accepts: operations that cut the buffer into
 * blocks need a contiguous tensor; element-wise ones any dense layout, the
 * same on every rank; point-to-point any strides (sent from, or received
 * into, a contiguous copy when not contiguous: ops.cpp send())
 */
enum TensorLayout { LAYOUT_CONTIGUOUS, LAYOUT_DENSE, LAYOUT_ANY_STRIDES };
void check_tensor(const char *opname, const std::string &name, const at::Tensor &t,
		  TensorLayout layout);
[[noreturn]] void throw_status(const char *opname, int rank, ibc_status_t st);
[[noreturn]] void throw_unsupported(const char *opname, const char *needs);

/* the process group */
class ProcessGroupIbcoll : public BackendBase {
public:
	/*
	 * @profiling_prefix names the profiler events ("ibcoll:all_reduce", the
	 * way Gloo's are "gloo:all_reduce"); tests/torch/suite_driver.py sets
	 * "gloo" when it runs Gloo's tests on ibcoll.
	 */
	ProcessGroupIbcoll(const c10::intrusive_ptr<::c10d::Store> &store, int rank, int size,
			   std::chrono::milliseconds timeout,
			   const std::string &profiling_prefix = "ibcoll");
	~ProcessGroupIbcoll() override;

	const std::string getBackendName() const override
	{
		return "ibcoll";
	}

	/* ibcoll's name for the transport in use, e.g. "shm" or "tcp" */
	std::string transport() const;
	/* milliseconds of the communicator's wait bound */
	int64_t timeoutMs() const
	{
		return timeout_ms_;
	}

	/* the communicator, for the benchmark helpers of module.cpp only */
	ibc_comm_h comm() const
	{
		return comm_;
	}

	c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
						   const ::c10d::BroadcastOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
						   const ::c10d::AllreduceOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work>
	allreduce_coalesced(std::vector<at::Tensor> &tensors,
			    const ::c10d::AllreduceCoalescedOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work> reduce(std::vector<at::Tensor> &tensors,
						const ::c10d::ReduceOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
						   std::vector<at::Tensor> &inputs,
						   const ::c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
							 const ::c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work>
	allgather_coalesced(std::vector<std::vector<at::Tensor>> &output_lists,
			    std::vector<at::Tensor> &inputs,
			    const ::c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
						std::vector<at::Tensor> &inputs,
						const ::c10d::GatherOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor> &outputs,
						 std::vector<std::vector<at::Tensor>> &inputs,
						 const ::c10d::ScatterOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work>
	reduce_scatter(std::vector<at::Tensor> &outputs,
		       std::vector<std::vector<at::Tensor>> &inputs,
		       const ::c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work>
	_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
			     const ::c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
						       std::vector<int64_t> &output_splits,
						       std::vector<int64_t> &input_splits,
						       const ::c10d::AllToAllOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
						  std::vector<at::Tensor> &inputs,
						  const ::c10d::AllToAllOptions &opts) override;
	c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
					      int tag) override;
	c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
					      int tag) override;
	c10::intrusive_ptr<::c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
						       int tag) override;
	c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions &opts) override;
	void monitoredBarrier(const ::c10d::BarrierOptions &opts, bool wait_all_ranks) override;
	void startCoalescing() override;
	void endCoalescing(std::vector<c10::intrusive_ptr<::c10d::Work>> &reqs) override;
	void setSequenceNumberForGroup() override;
	uint64_t getSequenceNumberForGroup() override;

private:
	/* what one post() needs besides the call itself */
	struct Post {
		const char *what;                   /* op name for messages */
		::c10d::OpType type;
		const char *title;                  /* profiler event: "all_reduce" */
		std::vector<at::Tensor> inputs;     /* kept until the end; profiler shapes */
		std::vector<at::Tensor> outputs;    /* result() */
		std::vector<at::Tensor> keep;       /* staging buffers */
		std::function<void()> on_success;
		int source = -1;
	};
	/* @issue(OpState &, ibc_request_h *req_p) makes the ibc_i*() call (ops.cpp) */
	template <typename Issue> c10::intrusive_ptr<::c10d::Work> post(Post &&p, Issue &&issue);
	/* recv() (rank @src) and recvAnysource() (@any), ops.cpp */
	c10::intrusive_ptr<::c10d::Work> post_recv(const char *op, ::c10d::OpType type,
						   const char *title,
						   std::vector<at::Tensor> &tensors, int src, bool any,
						   int tag);
	void track(const std::shared_ptr<OpState> &op);
	/* every rank came to the group's creation, within its timeout (pg_ibcoll.cpp) */
	void join_wait(::c10d::Store &store, int64_t gen, int size, int rank);

	ibc_comm_h comm_ = nullptr;                 /* collectives */
	ibc_comm_h p2p_comm_ = nullptr;             /* send, recv (split from comm_) */
	c10::intrusive_ptr<::c10d::Store> store_;   /* bootstrap, monitoredBarrier */
	uint64_t monitored_seq_ = 0;
	int64_t timeout_ms_ = 0;
	std::string profiling_prefix_;
	std::mutex issue_mu_;                       /* one ibcoll call at a time */
	std::shared_ptr<Completer> completer_;
	std::vector<std::weak_ptr<OpState>> live_;  /* to finish at destruction */
	std::atomic<uint64_t> seq_{0};
	/* an operation failed: the destructor's warning is then not needed */
	std::shared_ptr<std::atomic<bool>> failed_ = std::make_shared<std::atomic<bool>>(false);
	bool coalescing_ = false;
};

/*
 * The Python module sets these so that a group destroyed from Python
 * (holding the GIL) releases it while it waits for its operations, which may
 * run Python future callbacks on the completer thread.
 */
extern void *(*gil_release_hook)(void);
extern void (*gil_restore_hook)(void *);

} // namespace ibcoll_torch

#endif /* IBCOLL_TORCH_PG_IBCOLL_HPP */
