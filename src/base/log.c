/* SPDX-License-Identifier: MIT */
/*
 * log.c - the logger behind log.h: configuration from IBC_DEBUG,
 * IBC_DEBUG_SUBSYS and IBC_DEBUG_FILE (read directly from the environment,
 * since the parameter module itself logs), line formatting, and the
 * thread-local text for ibc_last_error().
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "ibcoll.h"

#define IBC_LAST_ERROR_LEN 1024
#define IBC_LOG_LINE_LEN   2048

int ibc_log_level_cur = IBC_LEVEL_WARN;
uint64_t ibc_log_mask_cur = IBC_SUBSYS_INIT | IBC_SUBSYS_ENV;
int ibc_log_configured;

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file;
static char log_host[64];
static __thread int log_rank = -1;
static __thread char log_ctx[64];
static __thread char last_error[IBC_LAST_ERROR_LEN];

static const char *const level_names[IBC_LEVEL_COUNT] = {
	"NONE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE",
};

static const struct {
	const char *name;
	uint64_t bit;
} subsys_table[] = {
#define IBC_SUBSYS_DEF(name, bit) { #name, 1ULL << (bit) },
#include "base/log_subsys.def"
#undef IBC_SUBSYS_DEF
};

const char *ibc_log_level_name(int level)
{
	return level >= 0 && level < IBC_LEVEL_COUNT ? level_names[level] : "?";
}

const char *ibc_log_subsys_name(uint64_t subsys_bit)
{
	size_t i;

	for (i = 0; i < IBC_ARRAY_SIZE(subsys_table); i++)
		if (subsys_table[i].bit == subsys_bit)
			return subsys_table[i].name;
	return "?";
}

/* Returns 0 on success, -1 when @str is not a level name. */
int ibc_log_parse_level(const char *str, int *level_p)
{
	int i;

	for (i = 0; i < IBC_LEVEL_COUNT; i++) {
		if (!strcasecmp(str, level_names[i])) {
			*level_p = i;
			return 0;
		}
	}
	if (!strcasecmp(str, "VERSION")) { /* NCCL users type this */
		*level_p = IBC_LEVEL_WARN;
		return 0;
	}
	return -1;
}

/*
 * "INIT,IB,COLL", "ALL", "^SHM" (all but) or "ALL,^SHM". Returns 0 on
 * success, -1 at the first unknown name (the mask is then unchanged).
 */
int ibc_log_parse_subsys(const char *str, uint64_t *mask_p)
{
	uint64_t mask = 0;
	const char *p = str;
	int any_positive = 0;
	int any_negative = 0;
	uint64_t neg = 0;

	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		int negate = 0;
		uint64_t bits = 0;
		size_t i;

		while (len && isspace((unsigned char)*p)) {
			p++;
			len--;
		}
		if (len && *p == '^') {
			negate = 1;
			p++;
			len--;
		}
		if (len == 3 && !strncasecmp(p, "ALL", 3))
			bits = IBC_SUBSYS_ALL;
		for (i = 0; !bits && i < IBC_ARRAY_SIZE(subsys_table); i++)
			if (strlen(subsys_table[i].name) == len &&
			    !strncasecmp(p, subsys_table[i].name, len))
				bits = subsys_table[i].bit;
		if (!bits)
			return -1;
		if (negate) {
			neg |= bits;
			any_negative = 1;
		} else {
			mask |= bits;
			any_positive = 1;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	if (!any_positive && !any_negative)
		return -1;
	if (!any_positive)
		mask = IBC_SUBSYS_ALL;
	*mask_p = mask & ~neg;
	return 0;
}

int ibc_log_expand_path(const char *pattern, char *out, size_t out_len)
{
	size_t o = 0;
	const char *p;
	char host[64];

	if (gethostname(host, sizeof(host)) != 0)
		strcpy(host, "unknown");
	host[sizeof(host) - 1] = '\0';
	for (p = pattern; *p; p++) {
		char buf[80];
		const char *ins = NULL;

		if (p[0] == '%' && p[1] == 'h') {
			ins = host;
		} else if (p[0] == '%' && p[1] == 'p') {
			snprintf(buf, sizeof(buf), "%d", (int)getpid());
			ins = buf;
		}
		if (ins) {
			size_t n = strlen(ins);

			if (o + n >= out_len)
				return -1;
			memcpy(out + o, ins, n);
			o += n;
			p++;
		} else {
			if (o + 1 >= out_len)
				return -1;
			out[o++] = *p;
		}
	}
	out[o] = '\0';
	return 0;
}

static void log_configure_once(void)
{
	const char *lvl = getenv("IBC_DEBUG");
	const char *sub = getenv("IBC_DEBUG_SUBSYS");
	const char *file = getenv("IBC_DEBUG_FILE");
	int bad_level = 0;
	int bad_subsys = 0;
	int bad_file = 0;

	if (gethostname(log_host, sizeof(log_host)) != 0)
		strcpy(log_host, "unknown");
	log_host[sizeof(log_host) - 1] = '\0';
	if (lvl && *lvl && ibc_log_parse_level(lvl, &ibc_log_level_cur) != 0)
		bad_level = 1;
	if (sub && *sub && ibc_log_parse_subsys(sub, &ibc_log_mask_cur) != 0)
		bad_subsys = 1;
	if (file && *file) {
		char path[4096];

		if (ibc_log_expand_path(file, path, sizeof(path)) == 0)
			log_file = fopen(path, "a");
		if (!log_file)
			bad_file = 1;
		else
			setvbuf(log_file, NULL, _IOLBF, 0);
	}
	__atomic_store_n(&ibc_log_configured, 1, __ATOMIC_RELEASE);
	if (bad_level)
		IBC_LOG_WARN(ENV, "IBC_DEBUG=%s is not one of NONE ERROR WARN INFO DEBUG TRACE; using WARN", lvl);
	if (bad_subsys)
		IBC_LOG_WARN(ENV, "IBC_DEBUG_SUBSYS=%s has an unknown subsystem; using INIT,ENV", sub);
	if (bad_file)
		IBC_LOG_WARN(ENV, "IBC_DEBUG_FILE=%s cannot be opened (%s); logging to stderr", file,
			     strerror(errno));
}

void ibc_log_configure(void)
{
	pthread_once(&log_once, log_configure_once);
}

void ibc_log_set_rank(int rank)
{
	log_rank = rank;
	log_ctx[0] = '\0';
}

void ibc_log_set_rank_ctx(int rank, const char *ctx)
{
	if (!ctx)
		ctx = "";
	log_rank = rank;
	/* called on every operation: copy only when the context changed (an
	 * snprintf here cost 0.1-0.2 us of a 1 us 64 B all-reduce over shm) */
	if (strncmp(log_ctx, ctx, sizeof(log_ctx) - 1) != 0)
		snprintf(log_ctx, sizeof(log_ctx), "%s", ctx);
}

int ibc_log_get_rank(void)
{
	return log_rank;
}

void ibc_log_set_last_error(const char *text)
{
	if (!text[0]) {
		last_error[0] = '\0'; /* every operation clears it: no snprintf */
		return;
	}
	snprintf(last_error, sizeof(last_error), "%s", text);
}

const char *ibc_log_last_cause(void)
{
	const char *t = ibc_last_error();

	return *t ? ibc_log_strip_rank(t) : "local error";
}

const char *ibc_log_strip_rank(const char *text)
{
	const char *p = text;

	if (strncmp(p, "rank ", 5))
		return text;
	p += 5;
	while (*p >= '0' && *p <= '9')
		p++;
	if (p[0] == ' ' && p[1] == '(') {
		/* "rank 1 (world rank 7, communicator 3fa2b1c0): " */
		const char *q = strchr(p, ')');

		if (q)
			p = q + 1;
	}
	return p[0] == ':' && p[1] == ' ' ? p + 2 : text;
}

const char *ibc_last_error(void)
{
	return last_error;
}

void ibc_log_emit(int level, uint64_t subsys, const char *file, int line, const char *fmt, ...)
{
	char msg[IBC_LOG_LINE_LEN];
	char prefix[256];
	const char *base = strrchr(file, '/');
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level <= IBC_LEVEL_WARN) {
		if (log_rank >= 0 && log_ctx[0])
			snprintf(last_error, sizeof(last_error), "rank %d (%s): %.*s", log_rank, log_ctx,
				 (int)sizeof(last_error) - 100, msg);
		else if (log_rank >= 0)
			snprintf(last_error, sizeof(last_error), "rank %d: %.*s", log_rank,
				 (int)sizeof(last_error) - 32, msg);
		else
			snprintf(last_error, sizeof(last_error), "%.*s", (int)sizeof(last_error) - 1, msg);
	}
	if (!ibc_log_enabled(level, subsys))
		return;         /* recorded for ibc_last_error(), not printed */
	base = base ? base + 1 : file;
	n = snprintf(prefix, sizeof(prefix), "%s:%d:%ld ", log_host, (int)getpid(),
		     (long)syscall(SYS_gettid));
	if (log_rank >= 0 && log_ctx[0])
		n += snprintf(prefix + n, sizeof(prefix) - (size_t)n, "[rank %d, %s] ", log_rank, log_ctx);
	else if (log_rank >= 0)
		n += snprintf(prefix + n, sizeof(prefix) - (size_t)n, "[rank %d] ", log_rank);
	if (level == IBC_LEVEL_INFO)
		snprintf(prefix + n, sizeof(prefix) - (size_t)n, "IBC %s %s ", level_names[level],
			 ibc_log_subsys_name(subsys));
	else
		snprintf(prefix + n, sizeof(prefix) - (size_t)n, "IBC %s %s %s:%d ",
			 ibc_log_level_name(level), ibc_log_subsys_name(subsys), base, line);
	pthread_mutex_lock(&log_lock);
	fprintf(log_file ? log_file : stderr, "%s%s\n", prefix, msg);
	pthread_mutex_unlock(&log_lock);
}
