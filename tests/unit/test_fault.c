/* SPDX-License-Identifier: MIT */
/* test_fault.c - IBC_FAULT_INJECT parsing and the n-th-call trigger. */
#include "config.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/fault.h"
#include "base/param.h"
#include "tap.h"

int main(void)
{
	int site = -1;
	long nth = -1;
	void *p[5];
	int i;
	int nfail = 0;

	tap_is_int(ibc_fault_parse("alloc:3", &site, &nth), 0, "alloc:3 parses");
	tap_is_int(site, IBC_FAULT_ALLOC, "site alloc");
	tap_is_int(nth, 3, "n = 3");
	tap_is_int(ibc_fault_parse("verbs:1", &site, &nth), 0, "verbs:1 parses");
	tap_is_int(site, IBC_FAULT_VERBS, "site verbs");
	tap_is_int(ibc_fault_parse("disk:1", &site, &nth), -1, "unknown site");
	tap_is_int(ibc_fault_parse("alloc:0", &site, &nth), -1, "n must be >= 1");
	tap_is_int(ibc_fault_parse("alloc", &site, &nth), -1, "missing n");
	tap_is_int(ibc_fault_parse("alloc:2x", &site, &nth), -1, "trailing garbage");

	setenv("IBC_DEBUG", "NONE", 1);
	setenv("IBC_FAULT_INJECT", "alloc:3", 1);
	ibc_fault_configure();
	tap_is_int(ibc_fault_fired_count(), 0, "nothing fired yet");
	for (i = 0; i < 5; i++) {
		p[i] = ibc_malloc(16, "test buffer");
		if (!p[i])
			nfail++;
	}
	tap_ok(p[0] && p[1] && !p[2] && p[3] && p[4], "exactly the third allocation failed");
	tap_is_int(nfail, 1, "one failure");
	tap_is_int(ibc_fault_fired_count(), 1, "fired once");
	tap_ok(!ibc_fault_hit(IBC_FAULT_SOCK, "other site"), "other sites unaffected");
	for (i = 0; i < 5; i++)
		ibc_free(p[i]);
	return tap_done();
}
