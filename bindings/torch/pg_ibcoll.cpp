/* SPDX-License-Identifier: MIT */
/*
 * pg_ibcoll.cpp - ProcessGroupIbcoll: bootstrap through the c10d Store,
 * the communicator's timeout, teardown, coalescing and monitoredBarrier.
 * The operations and post() are in ops.cpp.
 *
 * Bootstrap (as ProcessGroupNCCL shares its id): every rank adds 1 to the
 * store key "ibcoll/gen" to learn the generation of this group in its
 * store (groups re-created under one name get new keys), and waits until
 * every rank has (join_wait(): the group's timeout bounds a rank that never
 * comes); rank 0 makes the
 * unique id and sets "ibcoll/uid/<gen>"; the others get it (the store's
 * timeout bounds that); all call ibc_comm_init_rank(). torch already gives
 * each group its own PrefixStore, so groups never share keys.
 */
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

#include "pg_ibcoll.hpp"

namespace ibcoll_torch {

void *(*gil_release_hook)(void) = nullptr;
void (*gil_restore_hook)(void *) = nullptr;

/* IBC_TIMEOUT_MS bounds, from docs/env.md */
static const int64_t timeout_min_ms = 100;
static const int64_t timeout_max_ms = 86400000;

/* what rank 0 stores in place of the unique id when it could not make one */
static const char store_error[] = "ibcoll-error: ";

/* the group's timeout as the communicators' wait bound, within IBC_TIMEOUT_MS's range */
static int64_t group_timeout_ms(std::chrono::milliseconds timeout)
{
	return std::min(std::max((int64_t)timeout.count(), timeout_min_ms), timeout_max_ms);
}

/*
 * Wait until every rank of the group has come to its creation (the store's
 * "ibcoll/gen" counter has reached the end of generation @gen), bounded by
 * the group's timeout, and by IBC_BOOTSTRAP_TIMEOUT_MS (the library's value
 * in force, ibc_get_param_int()) as ibc_comm_init_rank() would be: a rank that never
 * comes fails the others within the timeout given to init_process_group()
 * or new_group(), as Gloo's rendezvous does, naming how many did not come.
 */
void ProcessGroupIbcoll::join_wait(::c10d::Store &store, int64_t gen, int size, int rank)
{
	int64_t boot_ms = 60000;

	/* the value in force: a valid environment value or the default */
	if (ibc_get_param_int("IBC_BOOTSTRAP_TIMEOUT_MS", &boot_ms) != IBC_OK)
		throw std::runtime_error(std::string("ibcoll: process group creation: ") +
					 ibc_last_error());
	int64_t bound = std::min(timeout_ms_, boot_ms);
	auto start = std::chrono::steady_clock::now();
	int64_t want = (gen + 1) * size;
	int64_t have = store.add("ibcoll/gen", 0);

	while (have < want) {
		int64_t el = std::chrono::duration_cast<std::chrono::milliseconds>(
				     std::chrono::steady_clock::now() - start).count();

		if (el >= bound)
			throw std::runtime_error(
				"ibcoll: process group creation on rank " + std::to_string(rank) + ": " +
				std::to_string(want - have) + " of " + std::to_string(size) +
				" ranks did not come within " + std::to_string(bound) + " ms (" +
				(bound == timeout_ms_ ? "the group's timeout" : "IBC_BOOTSTRAP_TIMEOUT_MS") +
				"): check WORLD_SIZE, RANK and that every rank starts");
		std::this_thread::sleep_for(std::chrono::milliseconds(el < 100 ? 1 : 10));
		have = store.add("ibcoll/gen", 0);
	}
}

ProcessGroupIbcoll::ProcessGroupIbcoll(const c10::intrusive_ptr<::c10d::Store> &store, int rank,
				       int size, std::chrono::milliseconds timeout,
				       const std::string &profiling_prefix)
	: BackendBase(rank, size), store_(store), profiling_prefix_(profiling_prefix),
	  completer_(std::make_shared<Completer>())
{
	ibc_unique_id_t id;
	ibc_status_t st;
	int64_t gen;
	std::string key;

	timeout_ms_ = group_timeout_ms(timeout);
	if (rank < 0 || rank >= size)
		throw std::runtime_error("ibcoll: process group creation: rank " +
					 std::to_string(rank) + " is out of range for " +
					 std::to_string(size) + " ranks");
	gen = (store->add("ibcoll/gen", 1) - 1) / size;
	join_wait(*store, gen, size, rank);
	key = "ibcoll/uid/" + std::to_string(gen);
	if (rank == 0) {
		st = ibc_get_unique_id(&id);
		if (st != IBC_OK) {
			/* tell the others now rather than let them wait for the store's timeout */
			std::string why = std::string(store_error) + ibc_last_error();

			store->set(key, std::vector<uint8_t>(why.begin(), why.end()));
			throw_status("process group creation (ibc_get_unique_id)", rank, st);
		}
		store->set(key, std::vector<uint8_t>((const uint8_t *)&id,
						     (const uint8_t *)&id + sizeof(id)));
	} else {
		std::vector<uint8_t> v = store->get(key);
		std::string text(v.begin(), v.end());

		if (text.rfind(store_error, 0) == 0)
			throw std::runtime_error("ibcoll: process group creation failed on rank 0: " +
						 text.substr(strlen(store_error)));
		if (v.size() != sizeof(id))
			throw std::runtime_error("ibcoll: process group creation: the store's " +
						 key + " holds " + std::to_string(v.size()) +
						 " bytes, not an ibcoll unique id (" +
						 std::to_string(sizeof(id)) + " bytes)");
		memcpy(&id, v.data(), sizeof(id));
	}
	st = ibc_comm_init_rank(&comm_, size, &id, rank);
	if (st != IBC_OK)
		throw_status("process group creation (ibc_comm_init_rank)", rank, st);
	/*
	 * Sends and receives get a communicator of their own, as Gloo keeps them
	 * apart from its collectives: ibcoll runs one communicator's operations
	 * in issue order, and torch programs may put a collective between an
	 * isend and its peer's recv in different orders on the two ranks.
	 */
	st = ibc_comm_split(comm_, 0, rank, &p2p_comm_);
	if (st == IBC_OK)
		st = ibc_comm_set_timeout(comm_, timeout_ms_);
	if (st == IBC_OK)
		st = ibc_comm_set_timeout(p2p_comm_, timeout_ms_);
	if (st != IBC_OK) {
		const char *what = p2p_comm_ ? "process group creation (ibc_comm_set_timeout)"
					     : "process group creation (ibc_comm_split)";

		if (p2p_comm_)
			ibc_comm_destroy(p2p_comm_);
		ibc_comm_destroy(comm_);
		throw_status(what, rank, st);
	}
#if !IBCT_TORCH_2X
	init();
#endif
}

ProcessGroupIbcoll::~ProcessGroupIbcoll()
{
	void *gil = gil_release_hook ? gil_release_hook() : nullptr;
	std::vector<std::shared_ptr<OpState>> ops;
	ibc_status_t async = IBC_OK;

	{
		std::lock_guard<std::mutex> g(issue_mu_);
		for (auto &w : live_)
			if (auto op = w.lock())
				ops.push_back(std::move(op));
		live_.clear();
	}
	/*
	 * A failed communicator is aborted first, so that the waits below return
	 * at once instead of after the timeout; a healthy one finishes what was
	 * posted (Works still held by Python then hold finished operations).
	 */
	bool told = failed_->load();

	for (ibc_comm_h *c : { &comm_, &p2p_comm_ }) {
		if (ibc_comm_get_async_error(*c, &async) != IBC_OK || async == IBC_OK)
			continue;
		/*
		 * An error that no call reported (a root that differs between
		 * ranks is found after the broadcast returned on both): say it,
		 * since a destructor cannot raise; once, and not when an
		 * operation of this group failed (its error was raised, or is
		 * held by a Work the program dropped)
		 */
		if (!told)
			TORCH_WARN("ibcoll: process group of rank ", getRank(), " destroyed after an ",
				   "error no operation reported: ", ibc_last_error());
		told = true;
		ibc_comm_abort(*c);
		*c = nullptr;
	}
	for (auto &op : ops)
		op->complete();
	completer_->stop();
	if (p2p_comm_)
		ibc_comm_destroy(p2p_comm_);
	if (comm_)
		ibc_comm_destroy(comm_);
	if (gil && gil_restore_hook)
		gil_restore_hook(gil);
}

std::string ProcessGroupIbcoll::transport() const
{
	const char *name = nullptr;

	if (ibc_comm_transport(comm_, &name) != IBC_OK || !name)
		return "unknown";
	return name;
}

/*
 * "<prefix>:<name>" with a lifetime that outlives every profiler range: the
 * RecordFunction that c10d::Work starts keeps the pointer, not a copy.
 */
const char *profiling_title(const std::string &prefix, const char *name)
{
	static std::mutex mu;
	static std::unordered_set<std::string> titles;   /* node-based: stable pointers */
	std::lock_guard<std::mutex> g(mu);

	return titles.insert(prefix + ":" + name).first->c_str();
}

void ProcessGroupIbcoll::track(const std::shared_ptr<OpState> &op)
{
	/* drop the finished ones now and then; the list stays short */
	if (live_.size() >= 64) {
		live_.erase(std::remove_if(live_.begin(), live_.end(),
					   [](const std::weak_ptr<OpState> &w) {
						   auto o = w.lock();
						   if (!o)
							   return true;
						   std::lock_guard<std::mutex> g(o->mu);
						   return o->done;
					   }),
			    live_.end());
	}
	live_.push_back(op);
}

void ProcessGroupIbcoll::startCoalescing()
{
	std::lock_guard<std::mutex> g(issue_mu_);
	/* sends and receives are batched; collectives on comm_ run as they come */
	ibc_status_t st = ibc_group_start(p2p_comm_);

	if (st != IBC_OK)
		throw_status("coalescing (ibc_group_start)", getRank(), st);
	coalescing_ = true;
}

void ProcessGroupIbcoll::endCoalescing(std::vector<c10::intrusive_ptr<::c10d::Work>> &reqs)
{
	std::lock_guard<std::mutex> g(issue_mu_);
	ibc_status_t st;

	(void)reqs;
	if (!coalescing_)
		return;
	coalescing_ = false;
	st = ibc_group_end(p2p_comm_);
	if (st != IBC_OK)
		throw_status("coalescing (ibc_group_end)", getRank(), st);
}

/*
 * monitoredBarrier() - Gloo's debugging barrier: rank 0 waits for every rank
 * within the timeout and names those that did not come, the others wait for
 * rank 0's verdict. Through the c10d Store, not the communicator, so that it
 * also names a rank stuck in a collective (ibcoll runs a communicator's ops
 * in order) and cannot be held up by posted operations. Messages are Gloo's,
 * which PyTorch's tests match. Every rank of the group must call it the same
 * number of times (the keys carry a per-group sequence number).
 */
void ProcessGroupIbcoll::monitoredBarrier(const ::c10d::BarrierOptions &opts, bool wait_all_ranks)
{
	using clock = std::chrono::steady_clock;
	std::string base = "ibcoll/mb/" + std::to_string(monitored_seq_++) + "/";
	auto timeout = opts.timeout.count() >= 0 ? opts.timeout
						  : std::chrono::milliseconds(timeout_ms_);
	auto start = clock::now();
	int rank = getRank();

	if (rank != 0) {
		std::vector<uint8_t> verdict;

		store_->set(base + std::to_string(rank), {1});
		while (!store_->check({base + "release"})) {
			/* rank 0 may come later, then wait up to the timeout for others */
			if (clock::now() - start > 2 * timeout + std::chrono::seconds(1))
				break;
			std::this_thread::sleep_for(std::chrono::milliseconds(2));
		}
		if (store_->check({base + "release"}))
			verdict = store_->get(base + "release");
		if (verdict.size() == 1 && verdict[0] == 1)
			return;
		throw std::runtime_error("Rank " + std::to_string(rank) + " successfully reached "
					 "monitoredBarrier, but received errors while waiting for "
					 "send/recv from rank 0. Please check rank 0 logs for faulty "
					 "rank.");
	}
	std::vector<int> missing;
	for (int r = 1; r < getSize(); r++) {
		std::string key = base + std::to_string(r);
		/* Gloo: one timeout for all when waiting for every rank, else what is left */
		auto deadline = (wait_all_ranks ? clock::now() : start) + timeout;

		if (!wait_all_ranks && clock::now() >= deadline && !store_->check({key})) {
			store_->set(base + "release", {0});
			throw std::runtime_error("Rank 0 timed out in monitoredBarrier after " +
						 std::to_string(timeout.count()) + " ms.");
		}
		while (!store_->check({key}) && clock::now() < deadline)
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		if (store_->check({key}))
			continue;
		missing.push_back(r);
		if (!wait_all_ranks)
			break;
	}
	store_->set(base + "release", {(uint8_t)(missing.empty() ? 1 : 0)});
	if (missing.empty())
		return;
	std::string list;
	for (size_t i = 0; i < missing.size(); i++)
		list += (i ? ", " : "") + std::to_string(missing[i]);
	throw std::runtime_error(std::string(missing.size() > 1 ? "Ranks " : "Rank ") + list +
				 " failed to pass monitoredBarrier in " +
				 std::to_string(timeout.count()) + " ms");
}

void ProcessGroupIbcoll::setSequenceNumberForGroup()
{
	/* a new communicator: every rank starts at 0 */
	seq_ = 0;
}

uint64_t ProcessGroupIbcoll::getSequenceNumberForGroup()
{
	return seq_;
}

} // namespace ibcoll_torch
