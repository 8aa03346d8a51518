// SPDX-License-Identifier: MIT
/*
 * test_dp_tool.c - helpers of test_train_dp.sh:
 *   test_dp_tool mkshard FILE NTOKENS SALT
 *       write an llm.c token shard with a learnable synthetic sequence
 *   test_dp_tool compare A B RTOL
 *       A and B raw fp32 vectors of the same length (ibc_gpt2 --dump-*):
 *       print max |A - B| and max |B|; exit 0 when max |A - B| <= RTOL * max |B|
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mkshard(const char *path, long n, long salt)
{
	int32_t h[256] = {20240520, 1, (int32_t)n};
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(h, sizeof(h), 1, f) != 1)
		return 1;
	for (long i = 0; i < n; i++) {
		/* a 1000-token alphabet, mostly t -> t + 7, with a jump every 50 */
		uint16_t t = (uint16_t)((i * 7 + salt + (i / 50) * 13) % 1000);

		if (fwrite(&t, 2, 1, f) != 1)
			return 1;
	}
	return fclose(f) != 0;
}

static float *slurp(const char *path, long *n_p)
{
	FILE *f = fopen(path, "rb");
	float *x;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0)
		return NULL;
	n = ftell(f) / 4;
	rewind(f);
	x = malloc((n ? n : 1) * sizeof(float));
	if (!x || (long)fread(x, 4, n, f) != n) {
		fclose(f);
		free(x);
		return NULL;
	}
	fclose(f);
	*n_p = n;
	return x;
}

static int compare(const char *pa, const char *pb, double rtol)
{
	long na;
	long nb;
	float *a = slurp(pa, &na);
	float *b = slurp(pb, &nb);
	double maxd = 0;
	double maxb = 0;
	long at = 0;
	int ok;

	if (!a || !b || na != nb || na == 0) {
		printf("cannot compare %s and %s (missing or different lengths)\n", pa, pb);
		return 2;
	}
	for (long i = 0; i < na; i++) {
		double d = fabs((double)a[i] - b[i]);

		if (d > maxd || isnan(d)) {
			maxd = isnan(d) ? INFINITY : d;
			at = i;
		}
		maxb = fmax(maxb, fabs(b[i]));
	}
	ok = maxd <= rtol * maxb;
	printf("%ld values: max |a - b| %.3e (at %ld), max |b| %.3e, ratio %.2e, limit %.1e\n", na,
	       maxd, at, maxb, maxb > 0 ? maxd / maxb : 0, rtol);
	free(a);
	free(b);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "mkshard") == 0)
		return mkshard(argv[2], atol(argv[3]), atol(argv[4]));
	if (argc == 5 && strcmp(argv[1], "compare") == 0)
		return compare(argv[2], argv[3], atof(argv[4]));
	fprintf(stderr, "usage: test_dp_tool mkshard FILE NTOKENS SALT | compare A B RTOL\n");
	return 2;
}
