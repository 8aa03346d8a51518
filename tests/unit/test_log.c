/* SPDX-License-Identifier: MIT */
/*
 * test_log.c - log level and subsystem parsing, %h/%p expansion, the line
 * format written to IBC_DEBUG_FILE, and ibc_last_error().
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "ibcoll.h"
#include "tap.h"

int main(void)
{
	int level = -1;
	uint64_t mask = 0;
	char path[256];
	char host[64];
	char want[512];
	char line[1024];
	FILE *f;
	int found_info = 0;
	int found_debug = 0;

	tap_is_int(ibc_log_parse_level("INFO", &level), 0, "INFO parses");
	tap_is_int(level, IBC_LEVEL_INFO, "INFO level");
	tap_is_int(ibc_log_parse_level("trace", &level), 0, "lower case parses");
	tap_is_int(level, IBC_LEVEL_TRACE, "TRACE level");
	tap_is_int(ibc_log_parse_level("NONE", &level), 0, "NONE parses");
	tap_is_int(level, IBC_LEVEL_NONE, "NONE level");
	level = 77;
	tap_is_int(ibc_log_parse_level("LOUD", &level), -1, "unknown level rejected");
	tap_is_int(level, 77, "rejected level leaves the output alone");

	tap_is_int(ibc_log_parse_subsys("INIT,IB,COLL", &mask), 0, "list parses");
	tap_is_int(mask, IBC_SUBSYS_INIT | IBC_SUBSYS_IB | IBC_SUBSYS_COLL, "list mask");
	tap_is_int(ibc_log_parse_subsys("ALL", &mask), 0, "ALL parses");
	tap_ok(mask == IBC_SUBSYS_ALL, "ALL mask");
	tap_is_int(ibc_log_parse_subsys("^SHM", &mask), 0, "exclusion parses");
	tap_ok(mask == (IBC_SUBSYS_ALL & ~(uint64_t)IBC_SUBSYS_SHM), "^SHM is all but SHM");
	tap_is_int(ibc_log_parse_subsys("ALL,^TREE,^RING", &mask), 0, "ALL with exclusions");
	tap_ok(!(mask & IBC_SUBSYS_TREE) && !(mask & IBC_SUBSYS_RING) && (mask & IBC_SUBSYS_IB),
	       "exclusions removed, rest kept");
	mask = 5;
	tap_is_int(ibc_log_parse_subsys("INIT,BOGUS", &mask), -1, "unknown subsystem rejected");
	tap_is_int(mask, 5, "rejected mask leaves the output alone");
	tap_is_int(ibc_log_parse_subsys("", &mask), -1, "empty list rejected");
	tap_is_str(ibc_log_subsys_name(IBC_SUBSYS_TUNING), "TUNING", "subsystem name");

	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = 0;
	tap_is_int(ibc_log_expand_path("/tmp/x.%h.%p.log", path, sizeof(path)), 0, "expand");
	snprintf(want, sizeof(want), "/tmp/x.%s.%d.log", host, (int)getpid());
	tap_is_str(path, want, "%%h and %%p expanded");
	tap_is_int(ibc_log_expand_path("%h%h%h%h%h%h%h%h", path, 8), -1, "overflow detected");

	/* the logger configures itself from the environment at first use */
	snprintf(path, sizeof(path), "/tmp/ibc-test-log.%d.%%p.log", (int)getpid());
	setenv("IBC_DEBUG_FILE", path, 1);
	setenv("IBC_DEBUG", "INFO", 1);
	setenv("IBC_DEBUG_SUBSYS", "COLL", 1);
	ibc_log_set_rank(3);
	IBC_LOG_INFO(COLL, "info line %d", 42);
	IBC_LOG_INFO(IB, "masked info line");
	IBC_LOG_DEBUG(COLL, "debug line above the level");
	IBC_LOG_WARN(SHM, "warn line %s", "always shown");
	tap_is_int(ibc_log_level_cur, IBC_LEVEL_INFO, "IBC_DEBUG=INFO applied");
	tap_is_str(ibc_last_error(), "rank 3: warn line always shown", "last error holds the WARN text");
	tap_ok(ibc_log_expand_path(path, want, sizeof(want)) == 0, "expand log path");
	f = fopen(want, "r");
	tap_ok(f != NULL, "log file %s exists", want);
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			if (strstr(line, "[rank 3] IBC INFO COLL info line 42"))
				found_info = 1;
			if (strstr(line, "debug line") || strstr(line, "masked info"))
				found_debug = 1;
			if (strstr(line, "IBC WARN SHM test_log.c:"))
				tap_ok(strstr(line, "warn line always shown") != NULL,
				       "WARN line carries file:line and the message");
		}
		fclose(f);
		unlink(want);
	}
	tap_ok(found_info, "INFO line with rank, level and subsystem written");
	tap_ok(!found_debug, "masked and too-verbose lines not written");
	return tap_done();
}
