/* SPDX-License-Identifier: MIT */
/*
 * tokenizer.h - GPT-2 token decoding from llm.c's tokenizer file (written by
 * trainer/prepro/prepro_corpus.mjs or llm.c's train_gpt2.py): a 256 x uint32
 * header {20240328, version, vocab_size, eot_token (version 2)}, then per
 * token id a uint8 byte count and that many bytes. Encoding is done offline
 * by the preprocessing script; the trainer only decodes samples.
 */
#ifndef IBC_TRAINER_TOKENIZER_H
#define IBC_TRAINER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TOKENIZER_MAGIC 20240328

struct tokenizer {
	uint32_t vocab_size; /* V */
	int eot_token;	     /* <|endoftext|>, 50256 for GPT-2 */
	uint8_t *bytes;	     /* all token bytes, concatenated */
	uint32_t *offset;    /* (V + 1) start of token i in bytes */
};

/**
 * tokenizer_init() - Load @path (version 1 or 2).
 * @t:       [out] filled on success.
 * @path:    [in]  the file.
 * @why:     [out] on failure, one line (no newline) saying why: missing or
 *           unreadable file with the errno text, bad magic, truncated table,
 *           no memory. Nothing is printed: the caller decides how to report.
 * @why_len: bytes of @why.
 * Return: 0, or -1 with @why filled.
 */
int tokenizer_init(struct tokenizer *t, const char *path, char *why, size_t why_len);
void tokenizer_free(struct tokenizer *t);

/**
 * tokenizer_decode() - Bytes of token @id (not NUL-terminated).
 * @len_p: [out] byte count.
 * Return: pointer into the table, or NULL for an id >= vocab_size.
 */
const uint8_t *tokenizer_decode(const struct tokenizer *t, int id, size_t *len_p);

/**
 * tokenizer_print() - Write token @id to @f, printable: UTF-8 and
 * whitespace pass through, other control bytes are written as \xNN.
 */
void tokenizer_print(const struct tokenizer *t, int id, FILE *f);

#endif /* IBC_TRAINER_TOKENIZER_H */
