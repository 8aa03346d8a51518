/* SPDX-License-Identifier: MIT */
/*
 * twait.h - the one bounded condition wait: every wait of the library on a
 * condition variable wakes at least every @ms, so that a thread notices a
 * deadline, an abort or a failure that no signal announced.
 */
#ifndef IBC_TWAIT_H
#define IBC_TWAIT_H

#include <pthread.h>
#include <time.h>

/*
 * ibc_cond_wait_ms() - pthread_cond_wait() on @cond (with @mutex held, as
 * for it) for at most @ms milliseconds. Returns 0 when signalled (or woken
 * spuriously), ETIMEDOUT when @ms passed.
 */
static inline int ibc_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *mutex, long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (ms % 1000) * 1000000L;
	ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	return pthread_cond_timedwait(cond, mutex, &ts);
}

#endif /* IBC_TWAIT_H */
