/* SPDX-License-Identifier: MIT */
/*
 * fault.h - fault injection (fault.c): IBC_FAULT_INJECT=<site>:<n> makes the
 * n-th call at <site> fail, for tests of every error path (agree_crash: the
 * process dies there instead; retime: the tuner's n-th re-timing on this
 * rank reports 4x the times it measured, as a timing taken under load).
 */
#ifndef IBC_FAULT_H
#define IBC_FAULT_H

#include "base/util.h"

enum ibc_fault_site {
	IBC_FAULT_ALLOC = 0,
	IBC_FAULT_SOCK,
	IBC_FAULT_SHM,
	IBC_FAULT_VERBS,
	IBC_FAULT_REG,
	IBC_FAULT_CUDA,
	IBC_FAULT_AGREE_CRASH,  /* not a refusal: the process dies (ibc_fault_crash()) */
	IBC_FAULT_RETIME,       /* not a refusal: the tuner's re-timing reports 4x its times */
	IBC_FAULT_CMA,          /* a cross-memory attach transfer fails with EPERM */
	IBC_FAULT_SITE_COUNT
};
extern int ibc_fault_armed;
int ibc_fault_hit_slow(enum ibc_fault_site site, const char *what);
static inline int ibc_fault_hit(enum ibc_fault_site site, const char *what)
{
	if (IBC_LIKELY(!ibc_fault_armed))
		return 0;
	return ibc_fault_hit_slow(site, what);
}
/* parse "<site>:<n>"; exposed for unit tests */
int ibc_fault_parse(const char *spec, int *site_p, long *nth_p);
void ibc_fault_configure(void);
/* number of faults fired so far in this process (tests check one fired) */
long ibc_fault_fired_count(void);
const char *ibc_fault_site_name(int site);
/*
 * ibc_fault_crash() - the injected crash of site agree_crash: SIGKILL to
 * this process, as a rank that dies in the middle of an agreement. The one
 * place the library ends its process, and only when a test armed it with
 * IBC_FAULT_INJECT (a crash at an exact point cannot be caused from outside).
 */
void ibc_fault_crash(void);

#endif /* IBC_FAULT_H */
