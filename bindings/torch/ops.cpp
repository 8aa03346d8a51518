/* SPDX-License-Identifier: MIT */
/*
 * ops.cpp - the operations of the 1.13 ProcessGroup interface over ibcoll.
 *
 * Each checks its tensors (CPU, dense, contiguous, one dtype, the shapes
 * the op implies), maps dtype and reduce op (dtype.cpp), and posts one
 * ibc_i*() call. Lists of tensors that are not one buffer in memory go
 * through a staging buffer: inputs are copied in before the call, outputs
 * out when it has finished (OpState::on_success). Sends and receives go to
 * the group's p2p communicator, everything else to its collective one.
 */
#include <numeric>
#include <stdexcept>

#include <ATen/MemoryOverlap.h>
#include <ATen/record_function.h>

#include "pg_ibcoll.hpp"

namespace ibcoll_torch {

using ::c10d::OpType;

static std::runtime_error op_error(const char *op, const std::string &msg)
{
	return std::runtime_error(std::string("ibcoll: ") + op + ": " + msg);
}

static at::Tensor &one_tensor(const char *op, std::vector<at::Tensor> &v, const char *what)
{
	if (v.size() != 1)
		throw op_error(op, std::string("takes one ") + what + " per process, got " +
				       std::to_string(v.size()) +
				       " (lists of several are for one process driving several GPUs)");
	return v[0];
}

/* a receive's tensor: its elements may not share memory (an expand()ed view) */
static void check_writable(const char *op, const at::Tensor &t)
{
	if (at::has_internal_overlap(t) == at::MemOverlap::Yes)
		throw op_error(op, "tensor has elements that share memory (sizes " +
				       c10::str(t.sizes()) + ", strides " + c10::str(t.strides()) +
				       "): receive into a tensor of its own");
}

static std::string nth(const char *name, size_t i)
{
	return std::string(name) + "[" + std::to_string(i) + "]";
}

static void same_dtype(const char *op, const std::string &name, const at::Tensor &t,
		       const at::Tensor &ref, const std::string &refname)
{
	if (t.scalar_type() != ref.scalar_type())
		throw op_error(op, name + " is " + std::string(c10::toString(t.scalar_type())) +
				       " but " + refname + " is " +
				       c10::toString(ref.scalar_type()) + "; they must match");
}

static void check_root(const char *op, int64_t root, int size)
{
	if (root < 0 || root >= size)
		throw op_error(op, "root rank " + std::to_string(root) +
				       " is out of range for a group of " + std::to_string(size) +
				       " ranks");
}

/*
 * The root's list of a gather (@kind "output") or a scatter ("input"): n
 * tensors of @ref's dtype and size, @ref being the op's own tensor (@refname
 * "the input" / "the output"); elsewhere no list (or torch's one empty one).
 * Returns the root's list, empty on the others.
 */
static std::vector<at::Tensor> root_list(const char *op, std::vector<std::vector<at::Tensor>> &lists,
					 size_t n, bool is_root, int64_t root, const char *kind,
					 const at::Tensor &ref, const char *refname)
{
	std::vector<at::Tensor> l;

	if (!is_root) {
		if (!lists.empty() && !(lists.size() == 1 && lists[0].empty()))
			throw op_error(op, "only the root rank " + std::to_string(root) + " takes an " +
					       kind + " list");
		return l;
	}
	if (lists.size() != 1 || lists[0].size() != n)
		throw op_error(op, std::string("the root needs one ") + kind + " list of " +
				       std::to_string(n) + " tensors");
	l = lists[0];
	for (size_t i = 0; i < n; i++) {
		check_tensor(op, nth(kind, i), l[i], LAYOUT_CONTIGUOUS);
		same_dtype(op, nth(kind, i), l[i], ref, refname);
		if (l[i].numel() != ref.numel())
			throw op_error(op, nth(kind, i) + " has " + std::to_string(l[i].numel()) +
					       " elements, " + refname + " " +
					       std::to_string(ref.numel()));
	}
	return l;
}

static void check_peer(const char *op, const char *role, int peer, int rank, int size)
{
	if (peer < 0 || peer >= size)
		throw op_error(op, std::string(role) + " rank " + std::to_string(peer) +
				       " is out of range for a group of " + std::to_string(size) +
				       " ranks");
	if (peer == rank)
		throw op_error(op, std::string(role) + " rank " + std::to_string(peer) +
				       " is this rank itself; ibcoll does not send to itself");
}

/* true when the tensors are blocks of equal size laid end to end in memory */
static bool adjacent(const std::vector<at::Tensor> &v)
{
	if (v.empty())
		return true;
	size_t nb = v[0].nbytes();
	const char *base = (const char *)v[0].data_ptr();

	if (nb == 0)
		return true;
	for (size_t i = 1; i < v.size(); i++)
		if (v[i].nbytes() != nb || (const char *)v[i].data_ptr() != base + i * nb)
			return false;
	return true;
}

/* one 1-d buffer holding @v's elements in order (@v of one dtype) */
static at::Tensor flat_copy(const std::vector<at::Tensor> &v)
{
	int64_t total = 0;
	int64_t off = 0;

	for (const auto &t : v)
		total += t.numel();
	at::Tensor flat = at::empty({total}, v[0].options());
	for (const auto &t : v) {
		flat.narrow(0, off, t.numel()).copy_(t.reshape({-1}));
		off += t.numel();
	}
	return flat;
}

/* copy @flat's elements back into @v, in order, starting at element @off */
static void flat_scatter(const at::Tensor &flat, int64_t off, const std::vector<at::Tensor> &v)
{
	for (const auto &t : v) {
		t.view({-1}).copy_(flat.narrow(0, off, t.numel()));
		off += t.numel();
	}
}

static bool overlap(const at::Tensor &a, const at::Tensor &b)
{
	const char *pa = (const char *)a.data_ptr();
	const char *pb = (const char *)b.data_ptr();

	return a.nbytes() && b.nbytes() && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

/*
 * post() - make the OpState, post it under the issue lock, hand back its
 * Work. A template, so that the ops' lambdas are inlined (no std::function
 * allocation per call); the profiler range is only started when a profiler
 * is listening (c10d::Work's constructor allocates one otherwise).
 */
template <typename Issue>
c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::post(Post &&p, Issue &&issue)
{
	auto op = std::make_shared<OpState>();
	ibc_request_h req = nullptr;
	ibc_status_t st;
	bool profiling = at::hasCallbacks();

	op->what = p.what;
	op->rank = getRank();
	op->source = p.source;
	op->outputs = std::move(p.outputs);
	op->keep = std::move(p.keep);
	/* the library reads the inputs until the end: they must outlive the caller's */
	op->keep.insert(op->keep.end(), p.inputs.begin(), p.inputs.end());
	op->on_success = std::move(p.on_success);
	op->group_failed = failed_;
	{
		std::lock_guard<std::mutex> g(issue_mu_);

		st = issue(*op, &req);
		if (st != IBC_OK) {
			failed_->store(true);
			throw_status(p.what, getRank(), st);
		}
		op->req = req;
		track(op);
		seq_++;
	}
	return c10::make_intrusive<WorkIbcoll>(
		op, completer_, getRank(), p.type,
		profiling ? profiling_title(profiling_prefix_, p.title) : nullptr,
		profiling ? c10::optional<std::vector<at::Tensor>>(std::move(p.inputs))
			  : c10::nullopt);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::allreduce(std::vector<at::Tensor> &tensors,
							       const ::c10d::AllreduceOptions &opts)
{
	static const char op[] = "allreduce";
	at::Tensor &t = one_tensor(op, tensors, "tensor");

	check_tensor(op, "tensor", t, LAYOUT_DENSE);
	Reduction r = reduce_elems(op, t, opts.reduceOp);
	void *p = t.data_ptr();
	ibc_comm_h c = comm_;

	return post({op, OpType::ALLREDUCE, "all_reduce", tensors, tensors, {}, nullptr},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_iallreduce(p, p, r.count, r.dtype, r.op, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupIbcoll::allreduce_coalesced(std::vector<at::Tensor> &tensors,
					const ::c10d::AllreduceCoalescedOptions &opts)
{
	static const char op[] = "allreduce_coalesced";

	if (tensors.empty())
		throw op_error(op, "needs at least one tensor");
	for (size_t i = 0; i < tensors.size(); i++) {
		check_tensor(op, nth("tensors", i), tensors[i], LAYOUT_CONTIGUOUS);
		same_dtype(op, nth("tensors", i), tensors[i], tensors[0], "tensors[0]");
	}
	at::Tensor flat = flat_copy(tensors);
	Reduction r = reduce_elems(op, flat, opts.reduceOp);
	void *p = flat.data_ptr();
	ibc_comm_h c = comm_;
	std::vector<at::Tensor> outs = tensors;

	return post({op, OpType::ALLREDUCE_COALESCED, "all_reduce", tensors,
		     tensors, {flat}, [flat, outs] { flat_scatter(flat, 0, outs); }},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_iallreduce(p, p, r.count, r.dtype, r.op, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::broadcast(std::vector<at::Tensor> &tensors,
							       const ::c10d::BroadcastOptions &opts)
{
	static const char op[] = "broadcast";
	at::Tensor &t = one_tensor(op, tensors, "tensor");

	check_tensor(op, "tensor", t, LAYOUT_DENSE);
	check_root(op, opts.rootRank, getSize());
	if (opts.rootTensor != 0)
		throw op_error(op, "root tensor index " + std::to_string(opts.rootTensor) +
				       " given, but there is one tensor per process");
	Elems e = move_elems(t);
	void *p = t.data_ptr();
	int root = (int)opts.rootRank;
	ibc_comm_h c = comm_;

	return post({op, OpType::BROADCAST, "broadcast", tensors, tensors, {}, nullptr},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_ibroadcast(p, p, e.count, e.dtype, root, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::reduce(std::vector<at::Tensor> &tensors,
							    const ::c10d::ReduceOptions &opts)
{
	static const char op[] = "reduce";
	at::Tensor &t = one_tensor(op, tensors, "tensor");

	check_tensor(op, "tensor", t, LAYOUT_DENSE);
	check_root(op, opts.rootRank, getSize());
	if (opts.rootTensor != 0)
		throw op_error(op, "root tensor index " + std::to_string(opts.rootTensor) +
				       " given, but there is one tensor per process");
	Reduction r = reduce_elems(op, t, opts.reduceOp);
	void *p = t.data_ptr();
	int root = (int)opts.rootRank;
	/* only the root's tensor changes, as with Gloo */
	void *out = root == getRank() ? p : nullptr;
	ibc_comm_h c = comm_;

	return post({op, OpType::REDUCE, "reduce", tensors, tensors, {}, nullptr},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_ireduce(p, out, r.count, r.dtype, r.op, root, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupIbcoll::allgather(std::vector<std::vector<at::Tensor>> &outputs,
			      std::vector<at::Tensor> &inputs, const ::c10d::AllgatherOptions &)
{
	static const char op[] = "allgather";
	at::Tensor &in = one_tensor(op, inputs, "input tensor");
	size_t n = (size_t)getSize();

	if (outputs.size() != 1)
		throw op_error(op, "takes one output list per process, got " +
				       std::to_string(outputs.size()));
	std::vector<at::Tensor> &outs = outputs[0];
	if (outs.size() != n)
		throw op_error(op, "the output list has " + std::to_string(outs.size()) +
				       " tensors for a group of " + std::to_string(n) + " ranks");
	check_tensor(op, "input", in, LAYOUT_CONTIGUOUS);
	bool even = true;
	for (size_t i = 0; i < n; i++) {
		check_tensor(op, nth("output", i), outs[i], LAYOUT_CONTIGUOUS);
		same_dtype(op, nth("output", i), outs[i], in, "the input");
		even = even && outs[i].numel() == in.numel();
	}
	if (outs[getRank()].numel() != in.numel())
		throw op_error(op, nth("output", getRank()) + " (this rank's) has " +
				       std::to_string(outs[getRank()].numel()) +
				       " elements, the input " + std::to_string(in.numel()));
	ibc_comm_h c = comm_;
	Elems e = move_elems(in);
	const void *sp = in.data_ptr();
	std::vector<at::Tensor> keep;
	std::function<void()> done;
	void *rp;

	if (!even) {
		/* per-rank sizes: counts and offsets from the output list */
		std::vector<size_t> counts(n), displs(n);
		size_t per = e.count / std::max<int64_t>(in.numel(), 1);
		for (size_t i = 0, off = 0; i < n; i++) {
			counts[i] = (size_t)outs[i].numel() * per;
			displs[i] = off;
			off += counts[i];
		}
		at::Tensor flat = at::empty({std::accumulate(outs.begin(), outs.end(), (int64_t)0,
							     [](int64_t a, const at::Tensor &t) {
								     return a + t.numel();
							     })},
					    in.options());
		rp = flat.data_ptr();
		return post({op, OpType::ALLGATHER, "all_gather", inputs, outs, {flat},
			     [flat, outs] { flat_scatter(flat, 0, outs); }},
			    [=](OpState &, ibc_request_h *req_p) {
				    return ibc_iallgatherv(sp, rp, e.count, counts.data(),
							    displs.data(), e.dtype, c, req_p);
			    });
	}
	if (adjacent(outs)) {
		rp = outs[0].data_ptr();
	} else {
		at::Tensor flat = at::empty({(int64_t)n * in.numel()}, in.options());

		rp = flat.data_ptr();
		keep.push_back(flat);
		done = [flat, outs] { flat_scatter(flat, 0, outs); };
	}
	return post({op, OpType::ALLGATHER, "all_gather", inputs, outs, keep, done},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_iallgather(sp, rp, e.count, e.dtype, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::_allgather_base(at::Tensor &output,
								     at::Tensor &input,
								     const ::c10d::AllgatherOptions &)
{
	static const char op[] = "_allgather_base";

	check_tensor(op, "input", input, LAYOUT_CONTIGUOUS);
	check_tensor(op, "output", output, LAYOUT_CONTIGUOUS);
	same_dtype(op, "the output", output, input, "the input");
	if (output.numel() != input.numel() * getSize())
		throw op_error(op, "the output has " + std::to_string(output.numel()) +
				       " elements; a group of " + std::to_string(getSize()) +
				       " ranks with inputs of " + std::to_string(input.numel()) +
				       " needs " + std::to_string(input.numel() * getSize()));
	Elems e = move_elems(input);
	const void *sp = input.data_ptr();
	void *rp = output.data_ptr();
	ibc_comm_h c = comm_;

	return post({op, OpType::_ALLGATHER_BASE, "_all_gather_base", {input}, {output},
		     {}, nullptr},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_iallgather(sp, rp, e.count, e.dtype, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupIbcoll::allgather_coalesced(std::vector<std::vector<at::Tensor>> &output_lists,
					std::vector<at::Tensor> &inputs,
					const ::c10d::AllgatherOptions &)
{
	static const char op[] = "allgather_coalesced";
	size_t n = (size_t)getSize();

	if (inputs.empty())
		throw op_error(op, "needs at least one input tensor");
	if (output_lists.size() != n)
		throw op_error(op, "has " + std::to_string(output_lists.size()) +
				       " output lists for a group of " + std::to_string(n) +
				       " ranks");
	for (size_t j = 0; j < inputs.size(); j++) {
		check_tensor(op, nth("inputs", j), inputs[j], LAYOUT_CONTIGUOUS);
		same_dtype(op, nth("inputs", j), inputs[j], inputs[0], "inputs[0]");
	}
	std::vector<at::Tensor> all_outs;
	for (size_t r = 0; r < n; r++) {
		if (output_lists[r].size() != inputs.size())
			throw op_error(op, "output list " + std::to_string(r) + " has " +
					       std::to_string(output_lists[r].size()) +
					       " tensors for " + std::to_string(inputs.size()) +
					       " inputs");
		for (size_t j = 0; j < inputs.size(); j++) {
			std::string name = "output_lists[" + std::to_string(r) + "][" +
					   std::to_string(j) + "]";
			const at::Tensor &t = output_lists[r][j];

			check_tensor(op, name, t, LAYOUT_CONTIGUOUS);
			same_dtype(op, name, t, inputs[0], "inputs[0]");
			if (t.numel() != inputs[j].numel())
				throw op_error(op, name + " has " + std::to_string(t.numel()) +
						       " elements, " + nth("inputs", j) + " " +
						       std::to_string(inputs[j].numel()));
			all_outs.push_back(t);
		}
	}
	at::Tensor fin = flat_copy(inputs);
	at::Tensor fout = at::empty({(int64_t)n * fin.numel()}, fin.options());
	Elems e = move_elems(fin);
	const void *sp = fin.data_ptr();
	void *rp = fout.data_ptr();
	ibc_comm_h c = comm_;

	return post({op, OpType::ALLGATHER_COALESCED, "all_gather", inputs,
		     all_outs, {fin, fout}, [fout, all_outs] { flat_scatter(fout, 0, all_outs); }},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_iallgather(sp, rp, e.count, e.dtype, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupIbcoll::gather(std::vector<std::vector<at::Tensor>> &outputs,
			   std::vector<at::Tensor> &inputs, const ::c10d::GatherOptions &opts)
{
	static const char op[] = "gather";
	at::Tensor &in = one_tensor(op, inputs, "input tensor");
	size_t n = (size_t)getSize();
	bool is_root = opts.rootRank == getRank();

	check_root(op, opts.rootRank, getSize());
	check_tensor(op, "input", in, LAYOUT_CONTIGUOUS);
	std::vector<at::Tensor> outs =
		root_list(op, outputs, n, is_root, opts.rootRank, "output", in, "the input");
	Elems e = move_elems(in);
	const void *sp = in.data_ptr();
	void *rp = nullptr;
	std::vector<at::Tensor> keep;
	std::function<void()> done;
	int root = (int)opts.rootRank;
	ibc_comm_h c = comm_;

	if (is_root && adjacent(outs)) {
		rp = outs[0].data_ptr();
	} else if (is_root) {
		at::Tensor flat = at::empty({(int64_t)n * in.numel()}, in.options());

		rp = flat.data_ptr();
		keep.push_back(flat);
		done = [flat, outs] { flat_scatter(flat, 0, outs); };
	}
	return post({op, OpType::GATHER, "gather", inputs, outs, keep, done},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_igather(sp, rp, e.count, e.dtype, root, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupIbcoll::scatter(std::vector<at::Tensor> &outputs,
			    std::vector<std::vector<at::Tensor>> &inputs,
			    const ::c10d::ScatterOptions &opts)
{
	static const char op[] = "scatter";
	at::Tensor &out = one_tensor(op, outputs, "output tensor");
	size_t n = (size_t)getSize();
	bool is_root = opts.rootRank == getRank();

	check_root(op, opts.rootRank, getSize());
	check_tensor(op, "output", out, LAYOUT_CONTIGUOUS);
	std::vector<at::Tensor> ins =
		root_list(op, inputs, n, is_root, opts.rootRank, "input", out, "the output");
	Elems e = move_elems(out);
	const void *sp = nullptr;
	void *rp = out.data_ptr();
	std::vector<at::Tensor> keep;
	int root = (int)opts.rootRank;
	ibc_comm_h c = comm_;

	if (is_root && adjacent(ins)) {
		sp = ins[0].data_ptr();
	} else if (is_root) {
		at::Tensor flat = flat_copy(ins);

		sp = flat.data_ptr();
		keep.push_back(flat);
	}
	return post({op, OpType::SCATTER, "scatter", ins, outputs, keep, nullptr},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_iscatter(sp, rp, e.count, e.dtype, root, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupIbcoll::reduce_scatter(std::vector<at::Tensor> &outputs,
				   std::vector<std::vector<at::Tensor>> &inputs,
				   const ::c10d::ReduceScatterOptions &opts)
{
	static const char op[] = "reduce_scatter";
	at::Tensor &out = one_tensor(op, outputs, "output tensor");
	size_t n = (size_t)getSize();

	if (inputs.size() != 1 || inputs[0].size() != n)
		throw op_error(op, "takes one input list of " + std::to_string(n) +
				       " tensors per process");
	std::vector<at::Tensor> &ins = inputs[0];
	check_tensor(op, "output", out, LAYOUT_CONTIGUOUS);
	for (size_t i = 0; i < n; i++) {
		check_tensor(op, nth("input", i), ins[i], LAYOUT_CONTIGUOUS);
		same_dtype(op, nth("input", i), ins[i], out, "the output");
		if (ins[i].numel() != out.numel())
			throw op_error(op, nth("input", i) + " has " +
					       std::to_string(ins[i].numel()) +
					       " elements, the output " + std::to_string(out.numel()) +
					       "; all must have the output's size");
	}
	Reduction r = reduce_elems(op, out, opts.reduceOp);
	std::vector<at::Tensor> keep;
	const void *sp;

	if (adjacent(ins)) {
		sp = ins[0].data_ptr();
	} else {
		at::Tensor flat = flat_copy(ins);

		sp = flat.data_ptr();
		keep.push_back(flat);
	}
	void *rp = out.data_ptr();
	ibc_comm_h c = comm_;

	return post({op, OpType::REDUCE_SCATTER, "reduce_scatter", ins, outputs, keep,
		     nullptr},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_ireduce_scatter(sp, rp, r.count, r.dtype, r.op, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupIbcoll::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
					 const ::c10d::ReduceScatterOptions &opts)
{
	static const char op[] = "_reduce_scatter_base";

	check_tensor(op, "input", input, LAYOUT_CONTIGUOUS);
	check_tensor(op, "output", output, LAYOUT_CONTIGUOUS);
	same_dtype(op, "the output", output, input, "the input");
	if (input.numel() != output.numel() * getSize())
		throw op_error(op, "the input has " + std::to_string(input.numel()) +
				       " elements; a group of " + std::to_string(getSize()) +
				       " ranks with outputs of " + std::to_string(output.numel()) +
				       " needs " + std::to_string(output.numel() * getSize()));
	Reduction r = reduce_elems(op, output, opts.reduceOp);
	const void *sp = input.data_ptr();
	void *rp = output.data_ptr();
	ibc_comm_h c = comm_;

	return post({op, OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {input},
		     {output}, {}, nullptr},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_ireduce_scatter(sp, rp, r.count, r.dtype, r.op, c, req_p);
		    });
}

/* element counts per peer from split sizes along dim 0 (empty: equal split) */
static std::vector<size_t> split_counts(const char *op, const char *name, const at::Tensor &t,
					const std::vector<int64_t> &splits, int n)
{
	std::vector<size_t> counts((size_t)n);
	int64_t rows = t.dim() ? t.size(0) : 1;
	int64_t row = rows ? t.numel() / rows : 0;

	if (splits.empty()) {
		if (rows % n)
			throw op_error(op, std::string(name) + " has " + std::to_string(rows) +
					       " rows along dim 0, not divisible by the group's " +
					       std::to_string(n) + " ranks; give split sizes");
		for (auto &c : counts)
			c = (size_t)(rows / n * row);
		return counts;
	}
	if (splits.size() != (size_t)n)
		throw op_error(op, std::string(name) + " split sizes have " +
				       std::to_string(splits.size()) + " entries for a group of " +
				       std::to_string(n) + " ranks");
	int64_t sum = 0;
	for (int i = 0; i < n; i++) {
		if (splits[i] < 0)
			throw op_error(op, std::string(name) + " split size " + std::to_string(i) +
					       " is negative");
		sum += splits[i];
		counts[i] = (size_t)(splits[i] * row);
	}
	if (sum != rows)
		throw op_error(op, std::string(name) + " split sizes add up to " +
				       std::to_string(sum) + " rows; the tensor has " +
				       std::to_string(rows));
	return counts;
}

static std::vector<size_t> offsets_of(const std::vector<size_t> &counts)
{
	std::vector<size_t> off(counts.size());
	size_t o = 0;

	for (size_t i = 0; i < counts.size(); i++) {
		off[i] = o;
		o += counts[i];
	}
	return off;
}

static bool all_equal(const std::vector<size_t> &a, const std::vector<size_t> &b)
{
	for (size_t i = 0; i < a.size(); i++)
		if (a[i] != a[0] || b[i] != a[0])
			return false;
	return true;
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupIbcoll::alltoall_base(at::Tensor &output, at::Tensor &input,
				  std::vector<int64_t> &output_splits,
				  std::vector<int64_t> &input_splits, const ::c10d::AllToAllOptions &)
{
	static const char op[] = "alltoall_base";
	int n = getSize();

	check_tensor(op, "input", input, LAYOUT_CONTIGUOUS);
	check_tensor(op, "output", output, LAYOUT_CONTIGUOUS);
	same_dtype(op, "the output", output, input, "the input");
	std::vector<size_t> scounts = split_counts(op, "the input", input, input_splits, n);
	std::vector<size_t> rcounts = split_counts(op, "the output", output, output_splits, n);
	at::Tensor in = input;
	std::vector<at::Tensor> keep;

	/* ibcoll's all-to-all is not in place: a documented copy of the input */
	if (overlap(in, output)) {
		in = input.clone();
		keep.push_back(in);
	}
	Elems e = move_elems(in);
	size_t per = e.count / std::max<int64_t>(in.numel(), 1);
	const void *sp = in.data_ptr();
	void *rp = output.data_ptr();
	ibc_comm_h c = comm_;

	if (all_equal(scounts, rcounts)) {
		size_t cnt = scounts[0] * per;

		return post({op, OpType::ALLTOALL_BASE, "all_to_all", {input}, {output}, keep,
			     nullptr},
			    [=](OpState &, ibc_request_h *req_p) {
				    return ibc_ialltoall(sp, rp, cnt, e.dtype, c, req_p);
			    });
	}
	for (auto &x : scounts)
		x *= per;
	for (auto &x : rcounts)
		x *= per;
	std::vector<size_t> sdispls = offsets_of(scounts);
	std::vector<size_t> rdispls = offsets_of(rcounts);

	return post({op, OpType::ALLTOALL_BASE, "all_to_all", {input}, {output}, keep,
		     nullptr},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_ialltoallv(sp, rp, scounts.data(), sdispls.data(),
						   rcounts.data(), rdispls.data(), e.dtype, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::alltoall(std::vector<at::Tensor> &outputs,
							      std::vector<at::Tensor> &inputs,
							      const ::c10d::AllToAllOptions &)
{
	static const char op[] = "alltoall";
	size_t n = (size_t)getSize();

	if (inputs.size() != n || outputs.size() != n)
		throw op_error(op, "takes " + std::to_string(n) + " input and " + std::to_string(n) +
				       " output tensors for a group of " + std::to_string(n) +
				       " ranks, got " + std::to_string(inputs.size()) + " and " +
				       std::to_string(outputs.size()));
	std::vector<size_t> scounts(n), rcounts(n);
	for (size_t i = 0; i < n; i++) {
		check_tensor(op, nth("input", i), inputs[i], LAYOUT_CONTIGUOUS);
		check_tensor(op, nth("output", i), outputs[i], LAYOUT_CONTIGUOUS);
		same_dtype(op, nth("input", i), inputs[i], inputs[0], "input[0]");
		same_dtype(op, nth("output", i), outputs[i], inputs[0], "input[0]");
		scounts[i] = (size_t)inputs[i].numel();
		rcounts[i] = (size_t)outputs[i].numel();
	}
	at::Tensor fin = flat_copy(inputs);
	at::Tensor fout = at::empty({(int64_t)std::accumulate(rcounts.begin(), rcounts.end(),
							      (size_t)0)},
				    fin.options());
	Elems e = move_elems(fin);
	size_t per = e.count / std::max<int64_t>(fin.numel(), 1);
	const void *sp = fin.data_ptr();
	void *rp = fout.data_ptr();
	ibc_comm_h c = comm_;
	std::vector<at::Tensor> outs = outputs;
	std::function<void()> done = [fout, outs] { flat_scatter(fout, 0, outs); };

	if (all_equal(scounts, rcounts)) {
		size_t cnt = scounts[0] * per;

		return post({op, OpType::ALLTOALL, "all_to_all", inputs, outputs,
			     {fin, fout}, done},
			    [=](OpState &, ibc_request_h *req_p) {
				    return ibc_ialltoall(sp, rp, cnt, e.dtype, c, req_p);
			    });
	}
	for (auto &x : scounts)
		x *= per;
	for (auto &x : rcounts)
		x *= per;
	std::vector<size_t> sdispls = offsets_of(scounts);
	std::vector<size_t> rdispls = offsets_of(rcounts);

	return post({op, OpType::ALLTOALL, "all_to_all", inputs, outputs, {fin, fout}, done},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_ialltoallv(sp, rp, scounts.data(), sdispls.data(),
						   rcounts.data(), rdispls.data(), e.dtype, c, req_p);
		    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::send(std::vector<at::Tensor> &tensors,
							  int dst, int tag)
{
	static const char op[] = "send";
	at::Tensor &t = one_tensor(op, tensors, "tensor");

	check_tensor(op, "tensor", t, LAYOUT_ANY_STRIDES);
	check_peer(op, "destination", dst, getRank(), getSize());
	/*
	 * A point-to-point message carries the tensor's elements in their
	 * logical (row-major) order, whatever either side's strides: a
	 * transposed or sliced tensor is sent from a contiguous copy (Gloo and
	 * NCCL refuse one; sending its memory order would fill the receiver
	 * with another arrangement of the values).
	 * On the group's own p2p communicator (pg_ibcoll.cpp), so that sends and
	 * receives do not take their place in the order of its collectives.
	 */
	at::Tensor src = t.is_contiguous() ? t : t.contiguous();
	Elems e = move_elems(src);
	const void *p = src.data_ptr();
	ibc_comm_h c = p2p_comm_;

	return post({op, OpType::SEND, "send", tensors, {}, {src}, nullptr},
		    [=](OpState &, ibc_request_h *req_p) {
			    return ibc_isend_tag(p, e.count, e.dtype, dst, tag, c, req_p);
		    });
}

/*
 * recv() and recvAnysource(): a receive from rank @src, or from any rank
 * when @any (the library writes the sender into the operation before the
 * request ends), in logical order (send()): a non-contiguous tensor
 * receives into a contiguous buffer, copied into the tensor on success.
 */
c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::post_recv(const char *op, ::c10d::OpType type,
							       const char *title,
							       std::vector<at::Tensor> &tensors,
							       int src, bool any, int tag)
{
	at::Tensor &t = one_tensor(op, tensors, "tensor");

	check_tensor(op, "tensor", t, LAYOUT_ANY_STRIDES);
	check_writable(op, t);
	if (!any)
		check_peer(op, "source", src, getRank(), getSize());

	at::Tensor buf = t.is_contiguous() ? t : at::empty(t.sizes(), t.options());
	Elems e = move_elems(buf);
	void *p = buf.data_ptr();
	ibc_comm_h c = p2p_comm_;
	/* the tensor is the profiler's input too, as with Gloo (its shapes) */
	Post po{op, type, title, tensors, tensors, {buf}, nullptr};

	if (!buf.is_same(t))
		po.on_success = [t, buf]() mutable { t.copy_(buf); };
	if (!any)
		po.source = src;
	return post(std::move(po), [=](OpState &o, ibc_request_h *req_p) {
		return ibc_irecv_tag(p, e.count, e.dtype, any ? IBC_ANY_SOURCE : src, tag,
				     any ? &o.source : nullptr, c, req_p);
	});
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::recv(std::vector<at::Tensor> &tensors,
							  int src, int tag)
{
	return post_recv("recv", OpType::RECV, "recv", tensors, src, false, tag);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::recvAnysource(std::vector<at::Tensor> &tensors,
								   int tag)
{
	return post_recv("recvAnysource", OpType::RECVANYSOURCE, "recvAnySource", tensors, -1,
			 true, tag);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupIbcoll::barrier(const ::c10d::BarrierOptions &)
{
	static const char op[] = "barrier";
	ibc_comm_h c = comm_;

	return post({op, OpType::BARRIER, "barrier", {}, {}, {}, nullptr},
		    [=](OpState &, ibc_request_h *req_p) { return ibc_ibarrier(c, req_p); });
}

} // namespace ibcoll_torch
