/* SPDX-License-Identifier: MIT */
/*
 * rel_harness.h - what the reliability drivers (tests/reliability/test_*.c)
 * use to run ranks as separate processes of tests/reliability/rel_worker:
 * spawn with a per-rank environment, read the worker's line protocol with
 * deadlines, signal, reap, and find results. Every wait here is bounded; a
 * driver that gives up kills what it started.
 *
 * Worker line protocol (one line each, on the worker's stdout):
 *   EV <name> <idx> <t_ms>                       an event (t_ms: CLOCK_MONOTONIC)
 *   RES <phase> <idx> <status> <t_ms> <el_ms> <text...>
 *       phase: init, coll, again, async, abort, blocked, destroy, fired, hyg
 *       status: ibc_status_t as an integer; el_ms: duration of the call;
 *       text: ibc_last_error() (or "-" when empty)
 * CLOCK_MONOTONIC is system-wide, so t_ms of a worker and of the driver
 * compare directly: detection time = RES t_ms - the driver's kill time.
 */
#ifndef IBC_REL_HARNESS_H
#define IBC_REL_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ibcoll.h"

#define REL_MAX_RANKS 16
#define REL_LINE_MAX 2048

/* struct rel_proc - one worker process and its pipes */
struct rel_proc {
	pid_t pid;              /* 0 when not running */
	int rank;
	int out_fd;             /* read end of the worker's stdout, nonblocking */
	int in_fd;              /* write end of the worker's stdin, -1 when closed */
	char buf[16384];        /* bytes read but not yet returned as lines */
	size_t len;
	int eof;
	int reaped;
	int wstatus;            /* waitpid status once reaped */
};

/* struct rel_res - one parsed RES line */
struct rel_res {
	char phase[32];
	int idx;
	int status;             /* ibc_status_t */
	int64_t t_ms;           /* CLOCK_MONOTONIC when the call returned */
	int64_t el_ms;          /* duration of the call */
	char text[REL_LINE_MAX];
};

/* monotonic milliseconds (same clock as the workers) */
int64_t rel_now_ms(void);

/*
 * rel_worker_path() - absolute path of the rel_worker program: $top_builddir
 * (set by the test harness) or the driver's own directory.
 */
const char *rel_worker_path(void);

/*
 * rel_new_uid_hex() - create a unique id (ibc_get_unique_id(): the bootstrap
 * root runs in this driver process) and hex-encode it into @hex (257 bytes).
 * Return: IBC_OK or the library's error.
 */
ibc_status_t rel_new_uid_hex(char hex[2 * IBC_UNIQUE_ID_BYTES + 1]);

/*
 * rel_spawn() - start one worker as @rank of @nranks joining @uid_hex.
 * @p:     [out] the process record.
 * @argv:  worker arguments after the program name, NULL-terminated.
 * @env:   extra "NAME=value" strings for this rank only, NULL-terminated (may be NULL).
 * The worker inherits the driver's environment (IBC_* from the test), plus
 * IBC_RANK, IBC_NRANKS and IBC_TEST_UID. With IBC_TEST_WRAPPER set (e.g.
 * "valgrind --quiet"), the worker runs under that command (PATH searched).
 * Return: 0, or -1 (errno text printed).
 */
int rel_spawn(struct rel_proc *p, int rank, int nranks, const char *uid_hex, char *const argv[],
	      char *const env[]);

/*
 * rel_read_line() - next complete line of @p before @deadline_ms.
 * Return: 1 with the line in @line (no newline), 0 on timeout, -1 at EOF.
 */
int rel_read_line(struct rel_proc *p, int64_t deadline_ms, char *line, size_t len);

/*
 * rel_expect() - read lines of @p until one starts with @prefix ("EV ready",
 * "RES coll"), skipping others, before @deadline_ms. Return as rel_read_line().
 */
int rel_expect(struct rel_proc *p, const char *prefix, int64_t deadline_ms, char *line, size_t len);

/* parse a "RES ..." line; 0 on success */
int rel_parse_res(const char *line, struct rel_res *r);

/*
 * rel_expect_res() - the next RES line of @p whose phase is @phase.
 * Return: 1 when found (in @r), 0 on timeout, -1 at EOF.
 */
int rel_expect_res(struct rel_proc *p, const char *phase, int64_t deadline_ms, struct rel_res *r);

/* write one line to the worker's stdin; 0 on success */
int rel_send_line(struct rel_proc *p, const char *line);

/* send @sig to @p (no-op when already reaped) */
void rel_signal(struct rel_proc *p, int sig);

/*
 * rel_reap() - wait for @p to exit before @deadline_ms; SIGKILL it at the
 * deadline. Return: 1 if it exited by itself, 0 if it had to be killed.
 * p->wstatus holds the status.
 */
int rel_reap(struct rel_proc *p, int64_t deadline_ms);

/* SIGKILL and reap every process of @ps (teardown of a failed scenario) */
void rel_kill_all(struct rel_proc *ps, int n);

/* 1 if @p exited normally with status 0 */
int rel_exited_ok(const struct rel_proc *p);

/* text of a wait status ("exit 0", "signal 9") in a static buffer */
const char *rel_wstatus_str(int wstatus);

/*
 * rel_names_rank() - does @text name @rank as the culprit? True when it
 * contains "rank <rank> (host " (the library's form for a named peer).
 */
int rel_names_rank(const char *text, int rank);

#endif /* IBC_REL_HARNESS_H */
