// SPDX-License-Identifier: MIT
/*
 * tokenizer.c - read llm.c's GPT-2 tokenizer file and decode token ids
 * (format in tokenizer.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

int tokenizer_init(struct tokenizer *t, const char *path, char *why, size_t why_len)
{
	uint32_t h[256];
	size_t cap = 1 << 20;
	size_t used = 0;
	FILE *f;

	memset(t, 0, sizeof(*t));
	f = fopen(path, "rb");
	if (!f) {
		snprintf(why, why_len, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fread(h, sizeof(h), 1, f) != 1 || h[0] != TOKENIZER_MAGIC || (h[1] != 1 && h[1] != 2) ||
	    h[2] == 0 || h[2] > (1u << 20)) {
		snprintf(why, why_len, "%s is not an llm.c tokenizer file (magic %d, versions 1-2)",
			 path, TOKENIZER_MAGIC);
		goto err;
	}
	t->vocab_size = h[2];
	t->eot_token = h[1] == 2 ? (int)h[3] : 50256;
	t->offset = malloc((t->vocab_size + 1) * sizeof(uint32_t));
	t->bytes = malloc(cap);
	if (!t->offset || !t->bytes)
		goto err_nomem;
	for (uint32_t i = 0; i < t->vocab_size; i++) {
		unsigned char len;

		if (fread(&len, 1, 1, f) != 1)
			goto err_short;
		if (used + len > cap) {
			uint8_t *nb = realloc(t->bytes, cap * 2);

			if (!nb)
				goto err_nomem;
			t->bytes = nb;
			cap *= 2;
		}
		if (len && fread(t->bytes + used, 1, len, f) != len)
			goto err_short;
		t->offset[i] = (uint32_t)used;
		used += len;
	}
	t->offset[t->vocab_size] = (uint32_t)used;
	fclose(f);
	return 0;

err_short:
	snprintf(why, why_len, "%s is truncated", path);
	goto err;
err_nomem:
	snprintf(why, why_len, "out of memory reading %s", path);
err:
	fclose(f);
	tokenizer_free(t);
	return -1;
}

void tokenizer_free(struct tokenizer *t)
{
	free(t->bytes);
	free(t->offset);
	memset(t, 0, sizeof(*t));
}

const uint8_t *tokenizer_decode(const struct tokenizer *t, int id, size_t *len_p)
{
	if (id < 0 || (uint32_t)id >= t->vocab_size)
		return NULL;
	*len_p = t->offset[id + 1] - t->offset[id];
	return t->bytes + t->offset[id];
}

void tokenizer_print(const struct tokenizer *t, int id, FILE *f)
{
	size_t len;
	const uint8_t *b = tokenizer_decode(t, id, &len);

	if (!b) {
		fprintf(f, "<%d?>", id);
		return;
	}
	for (size_t i = 0; i < len; i++) {
		if (b[i] >= 0x20 || b[i] == '\n' || b[i] == '\t')
			fputc(b[i], f);
		else
			fprintf(f, "\\x%02x", b[i]);
	}
}
