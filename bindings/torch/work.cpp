/* SPDX-License-Identifier: MIT */
/*
 * work.cpp - c10d::Work over ibcoll requests (WorkIbcoll), the shared state
 * of one posted operation (OpState) and the per-group completer thread.
 *
 * An OpState's request is waited for exactly once: by the first thread
 * that claims it (Work::wait, isCompleted seeing it end, or the completer). Others wait on its condition variable. Finishing runs the
 * copy-out (on success), ends the profiler range, then completes the
 * future, whose callbacks therefore run on the finishing thread.
 */
#include <algorithm>
#include <stdexcept>

#include "pg_ibcoll.hpp"

namespace ibcoll_torch {

void OpState::finish(ibc_status_t st, const std::string &text)
{
	std::exception_ptr err;
	c10::intrusive_ptr<c10::ivalue::Future> f;
	std::function<void()> rec;

	if (st == IBC_OK && on_success) {
		try {
			on_success();
		} catch (const std::exception &e) {
			err = std::make_exception_ptr(std::runtime_error(
				std::string("ibcoll: ") + what + ": copying the result out failed: " +
				e.what()));
		}
	} else if (st != IBC_OK) {
		err = std::make_exception_ptr(std::runtime_error(text));
	}
	if (err && group_failed)
		group_failed->store(true);
	{
		std::lock_guard<std::mutex> g(mu);
		done = true;
		error = err;
		req = nullptr;
		keep.clear();
		on_success = nullptr;
		f = fut;
		rec = std::move(record_end);
		record_end = nullptr;
	}
	cv.notify_all();
	if (rec)
		rec();
	if (f) {
		if (err)
			f->setError(err);
		else
			f->markCompleted(c10::IValue(outputs));
	}
}

/* the error text of a failed wait, read on the thread that waited */
static std::string wait_error(const std::string &what, int rank, ibc_status_t st)
{
	const char *text = ibc_last_error();
	/*
	 * "Timed out " as Gloo words it: tools and PyTorch's tests look for
	 * " (Timed out|closed|timeout) ", spaces included
	 */
	std::string msg = "ibcoll: " + what + " failed: " +
			  (st == IBC_ERR_TIMEOUT ? "Timed out waiting for its peers: " : "");

	if (text && *text)
		msg += text;
	else
		msg += "rank " + std::to_string(rank) + ": " + ibc_status_str(st);
	return msg + " (" + ibc_status_str(st) + ")";
}

void OpState::complete()
{
	{
		std::unique_lock<std::mutex> lk(mu);
		if (done)
			return;
		if (claimed) {
			cv.wait(lk, [this] { return done; });
			return;
		}
		claimed = true;
	}
	std::string text;
	ibc_status_t st = wait_claimed(&text);

	finish(st, text);
}

bool OpState::claim()
{
	std::lock_guard<std::mutex> g(mu);

	if (done || claimed)
		return false;
	claimed = true;
	return true;
}

ibc_status_t OpState::wait_claimed(std::string *text)
{
	/* claimed: nobody else touches @req until finish() clears it */
	ibc_status_t st = ibc_wait(req);

	if (st != IBC_OK)
		*text = wait_error(what, rank, st);
	return st;
}

bool OpState::test()
{
	{
		std::lock_guard<std::mutex> g(mu);
		int d = 0;

		if (done)
			return true;
		if (claimed || ibc_test(req, &d) != IBC_OK || !d)
			return false;
	}
	/* ended: collecting it returns at once */
	complete();
	return true;
}

struct Completer::Queue {
	std::mutex mu;
	std::condition_variable cv;
	std::deque<std::shared_ptr<OpState>> ops;
	std::vector<std::thread> threads;
	bool stopping = false;
	bool leader = false;            /* a thread is waiting for a request */
	int nidle = 0;                  /* threads waiting for work, or about to */
};

static void completer_run(std::shared_ptr<Completer::Queue> q);

/* every completer of the process, for stop_all() */
static std::mutex registry_mu;
static std::vector<std::weak_ptr<Completer::Queue>> registry;

/* one more completer thread, idle from now on; q->mu held */
static void completer_spawn(const std::shared_ptr<Completer::Queue> &q)
{
	q->nidle++;
	q->threads.emplace_back(completer_run, q);
}

Completer::Completer() : q_(std::make_shared<Queue>())
{
	std::lock_guard<std::mutex> g(registry_mu);

	registry.erase(std::remove_if(registry.begin(), registry.end(),
				      [](const std::weak_ptr<Queue> &w) { return w.expired(); }),
		       registry.end());
	registry.push_back(q_);
}

Completer::~Completer()
{
	stop();
}

void Completer::push(std::shared_ptr<OpState> op)
{
	{
		std::lock_guard<std::mutex> g(q_->mu);
		if (q_->stopping) {
			/* the group is going away and has finished everything it tracks */
			return;
		}
		q_->ops.push_back(std::move(op));
		/* no thread yet, or every one inside a callback: the leader hands over itself */
		if (q_->nidle == 0 && !q_->leader)
			completer_spawn(q_);
	}
	q_->cv.notify_one();
}

static void completer_run(std::shared_ptr<Completer::Queue> q)
{
	std::unique_lock<std::mutex> lk(q->mu);

	q->nidle--;     /* counted idle by completer_spawn() */
	for (;;) {
		std::shared_ptr<OpState> op;
		ibc_status_t st = IBC_OK;
		std::string text;
		bool mine;

		q->nidle++;
		q->cv.wait(lk, [&q] { return q->ops.empty() ? q->stopping : !q->leader; });
		q->nidle--;
		if (q->ops.empty())
			return;
		op = std::move(q->ops.front());
		q->ops.pop_front();
		q->leader = true;
		lk.unlock();
		mine = op->claim();
		if (mine)
			st = op->wait_claimed(&text);
		lk.lock();
		q->leader = false;
		/* the next op's wait must not wait for this op's callbacks */
		if (!q->ops.empty()) {
			if (q->nidle == 0)
				completer_spawn(q);
			else
				q->cv.notify_one();
		}
		lk.unlock();
		if (mine)
			op->finish(st, text);
		op.reset();
		lk.lock();
	}
}

static void queue_stop(const std::shared_ptr<Completer::Queue> &q)
{
	for (;;) {
		std::vector<std::thread> threads;

		{
			std::lock_guard<std::mutex> g(q->mu);
			q->stopping = true;
			threads.swap(q->threads);
		}
		if (threads.empty())
			return;
		q->cv.notify_all();
		for (auto &t : threads) {
			/* the last reference may go from a future callback on a completer thread */
			if (t.get_id() == std::this_thread::get_id())
				t.detach();
			else
				t.join();
		}
	}
}

void Completer::stop()
{
	queue_stop(q_);
}

void Completer::stop_all()
{
	std::vector<std::shared_ptr<Queue>> live;

	{
		std::lock_guard<std::mutex> g(registry_mu);
		for (auto &w : registry)
			if (auto q = w.lock())
				live.push_back(std::move(q));
	}
	for (auto &q : live)
		queue_stop(q);
}

WorkIbcoll::WorkIbcoll(std::shared_ptr<OpState> op, std::shared_ptr<Completer> completer,
		       int rank, ::c10d::OpType type, const char *profiling_title,
		       const c10::optional<std::vector<at::Tensor>> &inputs)
	: ::c10d::Work(rank, type, profiling_title, inputs), op_(std::move(op)),
	  completer_(std::move(completer))
{
	/* the base class started a profiler range; it ends when the op does */
	if (recordFunctionEndCallback_) {
		std::lock_guard<std::mutex> g(op_->mu);
		op_->record_end = std::move(recordFunctionEndCallback_);
		recordFunctionEndCallback_ = nullptr;
	}
}

WorkIbcoll::~WorkIbcoll()
{
	bool pending;

	{
		std::lock_guard<std::mutex> g(op_->mu);
		pending = !op_->done && !op_->claimed;
	}
	/* nobody will wait for it now: the completer does, keeping buffers alive */
	if (pending)
		completer_->push(op_);
}

bool WorkIbcoll::isCompleted()
{
	return op_->test();
}

bool WorkIbcoll::isSuccess() const
{
	std::lock_guard<std::mutex> g(op_->mu);
	return op_->done && !op_->error;
}

std::exception_ptr WorkIbcoll::exception() const
{
	std::lock_guard<std::mutex> g(op_->mu);
	return op_->error;
}

int WorkIbcoll::sourceRank() const
{
	std::lock_guard<std::mutex> g(op_->mu);
	if (op_->source < 0)
		throw std::runtime_error("ibcoll: sourceRank() is known only for a finished "
					 "receive (" + op_->what + ")");
	return op_->source;
}

std::vector<at::Tensor> WorkIbcoll::result()
{
	return op_->outputs;
}

void WorkIbcoll::synchronize()
{
	/* CPU tensors: nothing to order */
}

bool WorkIbcoll::wait(std::chrono::milliseconds timeout)
{
	if (timeout == kNoTimeout) {
		op_->complete();
	} else {
		auto start = std::chrono::steady_clock::now();
		auto deadline = start + timeout;
		auto nap = std::chrono::microseconds(10);

		while (!op_->test()) {
			auto now = std::chrono::steady_clock::now();

			if (now >= deadline)
				throw std::runtime_error(
					"ibcoll: " + op_->what + " on rank " + std::to_string(op_->rank) +
					" did not finish within the wait's timeout of " +
					std::to_string(timeout.count()) +
					" ms; it is still posted (the communicator's own timeout " +
					"bounds it)");
			if (now - start > std::chrono::microseconds(100)) {
				std::this_thread::sleep_for(nap);
				if (nap < std::chrono::microseconds(1000))
					nap *= 2;
			}
		}
	}
	std::lock_guard<std::mutex> g(op_->mu);
	if (op_->error)
		std::rethrow_exception(op_->error);
	return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkIbcoll::getFuture()
{
	c10::intrusive_ptr<c10::ivalue::Future> f;
	bool finished;
	std::exception_ptr err;

	{
		std::lock_guard<std::mutex> g(op_->mu);
		if (op_->fut)
			return op_->fut;
		op_->fut = c10::make_intrusive<c10::ivalue::Future>(
			c10::ListType::create(c10::TensorType::get()));
		f = op_->fut;
		finished = op_->done;
		err = op_->error;
	}
	if (finished) {
		if (err)
			f->setError(err);
		else
			f->markCompleted(c10::IValue(op_->outputs));
	} else {
		/* completes it; if another thread claimed the requests, it does */
		completer_->push(op_);
	}
	return f;
}

} // namespace ibcoll_torch
