// SPDX-License-Identifier: MIT
/*
 * train_gpt2.c - ibc_gpt2, the bundled data-parallel GPT-2 trainer: every
 * rank computes gradients on its own micro-batches, ibcoll averages them
 * (train.c: buckets reduced while backward runs, or ZeRO-1), and every rank
 * takes the same optimizer step. This file is the command line, logging,
 * validation, sampling and checkpoints; the model is gpt2.c, the step
 * train.c, the collectives dp_ibc.c.
 *
 *   mpirun -np 4 -x IBC_ROOT=127.0.0.1:29500 trainer/ibc_gpt2 -d 2 -T 64 -b 4
 *   IBC_RANK=r IBC_NRANKS=n IBC_ROOT=127.0.0.1:29500 trainer/ibc_gpt2 ...
 *   trainer/ibc_gpt2 ...            (one process, no communicator)
 *
 * Shapes in comments use gpt2.h's legend plus R (world size) and r (rank).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dp_ibc.h"
#include "gpt2.h"
#include "tokenizer.h"
#include "train.h"

struct options {
	const char *train_pattern; /* -i */
	const char *val_pattern;   /* -j */
	const char *tokenizer;	   /* -k */
	const char *init_model;	   /* -e */
	const char *resume;	   /* --resume model file; state file alongside */
	const char *out_dir;	   /* -o */
	const char *log_csv;	   /* --log */
	const char *dump_params;   /* --dump-params */
	const char *dump_grads;	   /* --dump-grads */
	int depth;		   /* -d */
	int max_seq_len;	   /* --max-seq-len */
	int stop_step;		   /* --stop: stop early (schedule still -n long) */
	int val_every;		   /* -v */
	int sample_every;	   /* -s */
	int gen_tokens;		   /* --gen */
	float temperature;	   /* --temp */
	int top_k;		   /* --top-k */
	int ckpt_every;		   /* -c */
	uint64_t init_seed;	   /* --init-seed */
	int threads;		   /* --threads */
	double peak_gflops;	   /* --peak-gflops, per rank */
	int print_hash;		   /* --print-hash */
	int quiet;		   /* --quiet: no per-step lines */
	int elastic;		   /* --elastic: survive dead ranks (shrink, redo the step) */
	const char *join;	   /* --join DIR: this process replaces a dead rank */
	const char *join_dir;	   /* --join-dir DIR: after a shrink, wait for a replacement */
	int join_wait_ms;	   /* --join-wait */
	struct train_config tc;
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: ibc_gpt2 [options]\n"
	    "data\n"
	    "  -i PATTERN   training shards (llm.c format, glob) [data/corpus/corpus_train_*.bin]\n"
	    "  -j PATTERN   validation shards [data/corpus/corpus_val_*.bin]; '' for none\n"
	    "  -k FILE      llm.c GPT-2 tokenizer, for samples [data/corpus/gpt2_tokenizer.bin]\n"
	    "model\n"
	    "  -d N         depth: L = N, C = 64N, NH = N (d2 tiny, d6 small, d12 124M) [2]\n"
	    "  --max-seq-len N  wpe rows of a new model [1024]\n"
	    "  -e FILE      start from an llm.c model file (v3 fp32 or v5 bf16) instead of random\n"
	    "  --init-seed N    seed of the random initialisation [1337]\n"
	    "  --resume FILE    continue from OUT/model_NNNNNNNN.bin and its state_NNNNNNNN.bin\n"
	    "batch and schedule\n"
	    "  -T N         sequence length [64]\n"
	    "  -b N         micro-batch per rank [4]\n"
	    "  -g N         gradient accumulation steps [1]; global batch R*b*g sequences\n"
	    "  -n N         optimizer steps (length of the lr schedule) [100]\n"
	    "  --stop N     stop after step N (for interrupted runs) [n]\n"
	    "  -l LR        peak learning rate [1e-3]\n"
	    "  -u N         warm-up steps [10]\n"
	    "  -q F         final lr fraction of the cosine decay [0.1]\n"
	    "  -w WD        AdamW weight decay on matrices and embeddings [0.1]\n"
	    "  --clip X     global gradient-norm clip, 0 off [1.0]\n"
	    "  --seed N     data order seed [42]\n"
	    "data parallelism\n"
	    "  --zero 0|1   1: ZeRO-1 (reduce-scatter, sharded AdamW, all-gather) [0]\n"
	    "  --bucket-mb X    gradient bucket cap, MiB [4]\n"
	    "  --overlap 0|1    reduce buckets while backward runs [1]\n"
	    "  --elastic    when ranks die, the others agree, shrink the communicator and redo\n"
	    "               the step with the same global batch (plain data parallelism)\n"
	    "  --vranks N   the global batch is N*b*g sequences whatever the number of ranks\n"
	    "               (to resume an elastic run's checkpoint with fewer ranks) [R]\n"
	    "  --join-dir DIR   --elastic: after a shrink, wait --join-wait ms for a replacement\n"
	    "               in DIR (a directory every rank sees) and grow back before the redo\n"
	    "  --join-wait MS   [30000]\n"
	    "  --join DIR   be that replacement: join the job waiting in DIR, take rank 0's state\n"
	    "evaluation and output\n"
	    "  -v N         validation every N steps (and first/last) [20]\n"
	    "  -m N         validation micro-batches per rank [8]\n"
	    "  -s N         sample every N steps (and at the end) [0: end only]\n"
	    "  --gen N      tokens per sample [64]; --temp X [1.0]; --top-k N [40]\n"
	    "  -o DIR       checkpoints go to DIR/model_NNNNNNNN.bin + state_NNNNNNNN.bin\n"
	    "  -c N         checkpoint every N steps (and at the end) [0: end only, needs -o]\n"
	    "  --log FILE   CSV log, one row per step (rank 0)\n"
	    "  --threads N  OpenMP threads per rank [OMP_NUM_THREADS, else cores / local ranks]\n"
	    "  --peak-gflops X  per-rank peak for the utilisation column [measured at start]\n"
	    "  --print-hash     print the parameter hash of every rank at the end\n"
	    "  --dump-params FILE / --dump-grads FILE  raw fp32 dumps at the end (rank 0; tests)\n"
	    "  --quiet      no per-step lines\n");
}

enum {
	OPT_MAXT = 256,
	OPT_INIT_SEED,
	OPT_RESUME,
	OPT_STOP,
	OPT_CLIP,
	OPT_SEED,
	OPT_ZERO,
	OPT_BUCKET,
	OPT_OVERLAP,
	OPT_GEN,
	OPT_TEMP,
	OPT_TOPK,
	OPT_LOG,
	OPT_THREADS,
	OPT_PEAK,
	OPT_HASH,
	OPT_DUMP_P,
	OPT_DUMP_G,
	OPT_QUIET,
	OPT_ELASTIC,
	OPT_VRANKS,
	OPT_JOIN,
	OPT_JOIN_DIR,
	OPT_JOIN_WAIT,
	OPT_HELP
};

static int parse_int(const char *s, int lo, int hi, const char *what, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "ibc_gpt2: %s must be an integer in [%d, %d], got '%s'\n", what, lo,
			hi, s);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int parse_float(const char *s, double lo, double hi, const char *what, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi)) {
		fprintf(stderr, "ibc_gpt2: %s must be a number in [%g, %g], got '%s'\n", what, lo,
			hi, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
	    {"max-seq-len", required_argument, NULL, OPT_MAXT},
	    {"init-seed", required_argument, NULL, OPT_INIT_SEED},
	    {"resume", required_argument, NULL, OPT_RESUME},
	    {"stop", required_argument, NULL, OPT_STOP},
	    {"clip", required_argument, NULL, OPT_CLIP},
	    {"seed", required_argument, NULL, OPT_SEED},
	    {"zero", required_argument, NULL, OPT_ZERO},
	    {"bucket-mb", required_argument, NULL, OPT_BUCKET},
	    {"overlap", required_argument, NULL, OPT_OVERLAP},
	    {"gen", required_argument, NULL, OPT_GEN},
	    {"temp", required_argument, NULL, OPT_TEMP},
	    {"top-k", required_argument, NULL, OPT_TOPK},
	    {"log", required_argument, NULL, OPT_LOG},
	    {"threads", required_argument, NULL, OPT_THREADS},
	    {"peak-gflops", required_argument, NULL, OPT_PEAK},
	    {"print-hash", no_argument, NULL, OPT_HASH},
	    {"dump-params", required_argument, NULL, OPT_DUMP_P},
	    {"dump-grads", required_argument, NULL, OPT_DUMP_G},
	    {"quiet", no_argument, NULL, OPT_QUIET},
	    {"elastic", no_argument, NULL, OPT_ELASTIC},
	    {"vranks", required_argument, NULL, OPT_VRANKS},
	    {"join", required_argument, NULL, OPT_JOIN},
	    {"join-dir", required_argument, NULL, OPT_JOIN_DIR},
	    {"join-wait", required_argument, NULL, OPT_JOIN_WAIT},
	    {"help", no_argument, NULL, OPT_HELP},
	    {NULL, 0, NULL, 0},
	};
	int c;
	int iv;
	double dv;
	int bad = 0;

	*o = (struct options){
	    .train_pattern = "data/corpus/corpus_train_*.bin",
	    .val_pattern = "data/corpus/corpus_val_*.bin",
	    .tokenizer = "data/corpus/gpt2_tokenizer.bin",
	    .depth = 2,
	    .max_seq_len = 1024,
	    .stop_step = -1,
	    .join_wait_ms = 30000,
	    .val_every = 20,
	    .gen_tokens = 64,
	    .temperature = 1.0f,
	    .top_k = 40,
	    .init_seed = 1337,
	    .tc = {.B = 4,
		   .T = 64,
		   .G = 1,
		   .max_steps = 100,
		   .lr = 1e-3f,
		   .final_lr_frac = 0.1f,
		   .warmup_steps = 10,
		   .weight_decay = 0.1f,
		   .beta1 = 0.9f,
		   .beta2 = 0.95f,
		   .eps = 1e-8f,
		   .grad_clip = 1.0f,
		   .zero = 0,
		   .bucket_elems = (4u << 20) / sizeof(floatX),
		   .overlap = 1,
		   .data_seed = 42,
		   .val_batches = 8},
	};
	while ((c = getopt_long(argc, argv, "i:j:k:e:o:d:T:b:g:n:l:u:q:w:v:m:s:c:h", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'i':
			o->train_pattern = optarg;
			break;
		case 'j':
			o->val_pattern = *optarg ? optarg : NULL;
			break;
		case 'k':
			o->tokenizer = optarg;
			break;
		case 'e':
			o->init_model = optarg;
			break;
		case 'o':
			o->out_dir = optarg;
			break;
		case 'd':
			bad |= parse_int(optarg, 1, 64, "-d", &o->depth);
			break;
		case 'T':
			bad |= parse_int(optarg, 1, 1 << 20, "-T", &o->tc.T);
			break;
		case 'b':
			bad |= parse_int(optarg, 1, 1 << 20, "-b", &o->tc.B);
			break;
		case 'g':
			bad |= parse_int(optarg, 1, 1 << 20, "-g", &o->tc.G);
			break;
		case 'n':
			bad |= parse_int(optarg, 1, 1 << 30, "-n", &o->tc.max_steps);
			break;
		case 'u':
			bad |= parse_int(optarg, 0, 1 << 30, "-u", &o->tc.warmup_steps);
			break;
		case 'v':
			bad |= parse_int(optarg, 0, 1 << 30, "-v", &o->val_every);
			break;
		case 'm':
			bad |= parse_int(optarg, 0, 1 << 20, "-m", &o->tc.val_batches);
			break;
		case 's':
			bad |= parse_int(optarg, 0, 1 << 30, "-s", &o->sample_every);
			break;
		case 'c':
			bad |= parse_int(optarg, 0, 1 << 30, "-c", &o->ckpt_every);
			break;
		case 'l':
			bad |= parse_float(optarg, 0, 10, "-l", &dv);
			o->tc.lr = (float)dv;
			break;
		case 'q':
			bad |= parse_float(optarg, 0, 1, "-q", &dv);
			o->tc.final_lr_frac = (float)dv;
			break;
		case 'w':
			bad |= parse_float(optarg, 0, 10, "-w", &dv);
			o->tc.weight_decay = (float)dv;
			break;
		case OPT_MAXT:
			bad |= parse_int(optarg, 1, 1 << 20, "--max-seq-len", &o->max_seq_len);
			break;
		case OPT_INIT_SEED:
			bad |= parse_int(optarg, 0, 0x7fffffff, "--init-seed", &iv);
			o->init_seed = (uint64_t)iv;
			break;
		case OPT_RESUME:
			o->resume = optarg;
			break;
		case OPT_STOP:
			bad |= parse_int(optarg, 0, 1 << 30, "--stop", &o->stop_step);
			break;
		case OPT_CLIP:
			bad |= parse_float(optarg, 0, 1e9, "--clip", &dv);
			o->tc.grad_clip = (float)dv;
			break;
		case OPT_SEED:
			bad |= parse_int(optarg, 0, 0x7fffffff, "--seed", &iv);
			o->tc.data_seed = (uint64_t)iv;
			break;
		case OPT_ZERO:
			bad |= parse_int(optarg, 0, 1, "--zero", &o->tc.zero);
			break;
		case OPT_BUCKET:
			bad |= parse_float(optarg, 1.0 / 1024, 1 << 20, "--bucket-mb", &dv);
			o->tc.bucket_elems = (size_t)(dv * (1 << 20) / sizeof(floatX));
			break;
		case OPT_OVERLAP:
			bad |= parse_int(optarg, 0, 1, "--overlap", &o->tc.overlap);
			break;
		case OPT_GEN:
			bad |= parse_int(optarg, 0, 1 << 20, "--gen", &o->gen_tokens);
			break;
		case OPT_TEMP:
			bad |= parse_float(optarg, 1e-3, 100, "--temp", &dv);
			o->temperature = (float)dv;
			break;
		case OPT_TOPK:
			bad |= parse_int(optarg, 0, 1 << 20, "--top-k", &o->top_k);
			break;
		case OPT_LOG:
			o->log_csv = optarg;
			break;
		case OPT_THREADS:
			bad |= parse_int(optarg, 1, 4096, "--threads", &o->threads);
			break;
		case OPT_PEAK:
			bad |= parse_float(optarg, 1e-3, 1e9, "--peak-gflops", &o->peak_gflops);
			break;
		case OPT_HASH:
			o->print_hash = 1;
			break;
		case OPT_DUMP_P:
			o->dump_params = optarg;
			break;
		case OPT_DUMP_G:
			o->dump_grads = optarg;
			break;
		case OPT_QUIET:
			o->quiet = 1;
			break;
		case OPT_ELASTIC:
			o->elastic = 1;
			break;
		case OPT_VRANKS:
			bad |= parse_int(optarg, 1, 1 << 20, "--vranks", &o->tc.vranks);
			break;
		case OPT_JOIN:
			o->join = optarg;
			o->elastic = 1;
			break;
		case OPT_JOIN_DIR:
			o->join_dir = optarg;
			break;
		case OPT_JOIN_WAIT:
			bad |= parse_int(optarg, 0, 1 << 30, "--join-wait", &o->join_wait_ms);
			break;
		case 'h':
		case OPT_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		const char *x = argv[optind];
		size_t xl = strlen(x);
		struct stat sb;

		/*
		 * An unquoted -i/-j glob reaches us as its first file (the
		 * option's value) and the rest as stray arguments.
		 */
		if ((xl > 4 && !strcmp(x + xl - 4, ".bin")) ||
		    (stat(x, &sb) == 0 && S_ISREG(sb.st_mode)))
			fprintf(stderr,
				"ibc_gpt2: unexpected argument '%s' (%d extra argument%s): did "
				"the shell expand a -i or -j pattern? quote it, e.g. "
				"-i 'data/corpus/corpus_train_*.bin'\n",
				x, argc - optind, argc - optind > 1 ? "s" : "");
		else
			fprintf(stderr, "ibc_gpt2: unexpected argument '%s'\n", x);
		return -1;
	}
	if (o->stop_step < 0 || o->stop_step > o->tc.max_steps)
		o->stop_step = o->tc.max_steps;
	if (o->tc.warmup_steps < 1)
		o->tc.warmup_steps = 1;
	if ((o->join || o->join_dir) && o->tc.zero) {
		fprintf(stderr, "ibc_gpt2: --join and --join-dir need --zero 0 (a ZeRO-1 job goes back to its last checkpoint instead)\n");
		bad = 1;
	}
	if (o->join_dir && !o->elastic) {
		fprintf(stderr, "ibc_gpt2: --join-dir needs --elastic\n");
		bad = 1;
	}
	if (o->join_dir && access(o->join_dir, W_OK) != 0) {
		fprintf(stderr, "ibc_gpt2: --join-dir %s: %s\n", o->join_dir, strerror(errno));
		bad = 1;
	}
	return bad ? -1 : 0;
}

/* OpenMP threads: flag, else OMP_NUM_THREADS, else cores / ranks on this host */
static int pick_threads(const struct options *o, int nranks)
{
	const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int nlocal = local && atoi(local) > 0 ? atoi(local) : nranks;
	int n;

	if (o->threads > 0)
		n = o->threads;
	else if (getenv("OMP_NUM_THREADS"))
		return 0; /* leave it to the OpenMP runtime */
	else
		n = ncpu / nlocal > 0 ? (int)(ncpu / nlocal) : 1;
#ifdef _OPENMP
	omp_set_num_threads(n);
#endif
	return n;
}

static int omp_threads(void)
{
#ifdef _OPENMP
	return omp_get_max_threads();
#else
	return 1;
#endif
}

/* measured fp32 matmul rate of this rank (GFLOP/s), with its threads */
static double measure_peak_gflops(void)
{
	int n = 512;
	floatX *a = calloc((size_t)n * n, sizeof(floatX));
	floatX *b = calloc((size_t)n * n, sizeof(floatX));
	floatX *c = calloc((size_t)n * n, sizeof(floatX));
	double best = 0;

	if (!a || !b || !c)
		goto out;
	for (size_t i = 0; i < (size_t)n * n; i++) {
		a[i] = (floatX)((i % 7) * 0.01);
		b[i] = (floatX)((i % 5) * 0.01);
	}
	for (int rep = 0; rep < 3; rep++) {
		double t = trainer_now_s();

		gpt2_gemm(n, n, n, a, n, 0, b, n, c, n);
		t = trainer_now_s() - t;
		if (2.0 * n * n * n / t / 1e9 > best)
			best = 2.0 * n * n * n / t / 1e9;
	}
out:
	free(a);
	free(b);
	free(c);
	return best;
}

/*
 * The job's peak fp32 matmul rate (GFLOP/s) for the utilisation column,
 * per host: the host's lowest rank times a matmul on 1 thread while the
 * host's other ranks wait in the all-reduce below, and the host's peak is
 * that x the cores its ranks can use, min(CPUs online, ranks on the host x
 * threads per rank); the job's is the sum over hosts. Each rank timing
 * itself counted a core as many times as ranks happened to time alone on
 * it: 4 ranks of 1 thread on 2 cores printed 884 GFLOP/s (4 x 221), where
 * one rank with 2 threads measures 392 (issue 22). Collective over the
 * job's @R ranks (two all-reduces); *@peak_p on every rank. Returns 0, or
 * -1 where an all-reduce failed.
 */
static int measure_job_peak(struct dp *dp, int R, int rank, double *peak_p)
{
	char host[256] = "";
	uint32_t hash = 2166136261u;      /* FNV-1a of the host name */
	double *h;
	double mine;
	double sum = 0;
	int nlocal = 0;
	int leader = -1;
	int threads = omp_threads();

	if (gethostname(host, sizeof(host) - 1) != 0)
		snprintf(host, sizeof(host), "unknown");
	for (const char *p = host; *p; p++)
		hash = (hash ^ (uint8_t)*p) * 16777619u;
	h = calloc((size_t)R, sizeof(double));
	if (!h)
		return -1;
	mine = (double)hash + 1;
	h[rank] = mine;
	if (R > 1 && dp->ops->allreduce_sum_f64(dp->ctx, h, (size_t)R) != 0) {
		free(h);
		return -1;
	}
	for (int r = 0; r < R; r++)
		if (h[r] == mine) {
			nlocal++;
			if (leader < 0)
				leader = r;
		}
	free(h);
	if (rank == leader) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		double one;

#ifdef _OPENMP
		omp_set_num_threads(1);
#endif
		one = measure_peak_gflops();
#ifdef _OPENMP
		omp_set_num_threads(threads);
#endif
		long cores = (long)nlocal * threads;

		if (ncpu > 0 && ncpu < cores)
			cores = ncpu;
		sum = one * (double)cores;
	}
	if (R > 1 && dp->ops->allreduce_sum_f64(dp->ctx, &sum, 1) != 0)
		return -1;
	*peak_p = sum;
	return 0;
}

/* ---- sampling ---- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* next token from logits (V): temperature, then top-k, then multinomial */
static int sample_token(const floatX *logits, int V, float temp, int top_k, uint64_t *rng,
			double *p)
{
	double maxv = -INFINITY;
	double sum = 0;
	double u;
	double thresh = -INFINITY;

	for (int i = 0; i < V; i++)
		if (logits[i] > maxv)
			maxv = logits[i];
	if (top_k > 0 && top_k < V) {
		/* the k-th largest logit, by repeated selection of a few maxima */
		double hi = INFINITY;

		for (int k = 0; k < top_k; k++) {
			double best = -INFINITY;

			for (int i = 0; i < V; i++)
				if (logits[i] < hi && logits[i] > best)
					best = logits[i];
			if (best == -INFINITY)
				break;
			thresh = best;
			hi = best;
		}
	}
	for (int i = 0; i < V; i++) {
		p[i] = logits[i] >= thresh ? exp((logits[i] - maxv) / temp) : 0;
		sum += p[i];
	}
	u = (rng_next(rng) >> 11) / 9007199254740992.0 * sum;
	for (int i = 0; i < V; i++) {
		u -= p[i];
		if (u <= 0 && p[i] > 0)
			return i;
	}
	return V - 1;
}

static void print_sample(struct gpt2 *m, const struct tokenizer *tok, const struct options *o,
			 int T, int step)
{
	int n = o->gen_tokens;
	int *tokens = malloc((n + 1) * sizeof(int));
	double *p = malloc(m->cfg.vocab_size * sizeof(double));
	uint64_t rng = 0x5eed0000ULL + step;
	int eot = tok ? tok->eot_token : 50256;

	if (!tokens || !p) {
		free(tokens);
		free(p);
		return;
	}
	tokens[0] = eot;
	printf("---- sample at step %d (%d tokens, temperature %.2f, top-k %d) ----\n", step, n,
	       o->temperature, o->top_k);
	for (int t = 1; t <= n; t++) {
		int ctx = t < T ? t : T; /* the last T tokens at most */
		const floatX *logits = gpt2_logits_last(m, tokens + t - ctx, ctx);

		if (!logits)
			break;
		tokens[t] =
		    sample_token(logits, m->cfg.vocab_size, o->temperature, o->top_k, &rng, p);
		if (tok)
			tokenizer_print(tok, tokens[t], stdout);
		else
			printf(" %d", tokens[t]);
	}
	printf("\n----\n");
	fflush(stdout);
	free(tokens);
	free(p);
}

/* ---- files ---- */

static int dump_floats(const char *path, const floatX *x, size_t n)
{
	FILE *f = fopen(path, "wb");
	int bad = !f;

	for (size_t i = 0; f && i < n && !bad; i++) {
		float v = (float)x[i];

		bad |= fwrite(&v, sizeof(v), 1, f) != 1;
	}
	if (f)
		bad |= fclose(f) != 0;
	if (bad)
		fprintf(stderr, "ibc_gpt2: cannot write %s\n", path);
	return bad ? -1 : 0;
}

/* state file next to a model file: .../model_N.bin -> .../state_N.bin */
static int state_path_for(const char *model_path, char *out, size_t n)
{
	const char *base = strrchr(model_path, '/');
	size_t dir = base ? (size_t)(base + 1 - model_path) : 0;

	base = model_path + dir;
	if (strncmp(base, "model_", 6) != 0) {
		fprintf(stderr, "ibc_gpt2: --resume wants a DIR/model_NNNNNNNN.bin file, got %s\n",
			model_path);
		return -1;
	}
	if ((size_t)snprintf(out, n, "%.*sstate_%s", (int)dir, model_path, base + 6) >= n)
		return -1;
	return 0;
}

static int save_checkpoint(struct trainer *tr, const struct options *o)
{
	char mpath[4096];
	char spath[4096];

	snprintf(mpath, sizeof(mpath), "%s/model_%08d.bin", o->out_dir, tr->step);
	snprintf(spath, sizeof(spath), "%s/state_%08d.bin", o->out_dir, tr->step);
	if (tr->dp.rank == 0 && gpt2_save(tr->model, mpath) != 0)
		return -1;
	if (trainer_save_state(tr, spath) != 0)
		return -1;
	if (tr->dp.rank == 0)
		printf("checkpoint: %s + %s\n", mpath, spath);
	return 0;
}

/*
 * --elastic --zero 1 after a shrink: the dead ranks' optimizer shards are
 * gone (only their owner held them), so every survivor goes back to the
 * last checkpoint (@ckpt_step; 0: the start of the run: --resume's files,
 * -e's model or the seeded initialisation with zero moments) with the new
 * shards. Why not a replica on a buddy rank: it would send every rank's
 * 2/R of the moments each step to keep a copy that is only used after a
 * failure; with a checkpoint every -c steps, a failure costs at most c
 * steps instead.
 */
static int reload_checkpoint(struct trainer *tr, const struct options *o, int ckpt_step)
{
	char mpath[4096];
	char spath[4096];
	const char *model_path = NULL;
	struct gpt2 *m2;

	if (ckpt_step > 0 && o->out_dir) {
		snprintf(mpath, sizeof(mpath), "%s/model_%08d.bin", o->out_dir, ckpt_step);
		model_path = mpath;
	} else if (o->resume) {
		model_path = o->resume;
	}
	if (model_path) {
		if (state_path_for(model_path, spath, sizeof(spath)) != 0)
			return -1;
	} else if (o->init_model) {
		model_path = o->init_model;
		spath[0] = '\0';
	}
	if (model_path) {
		m2 = gpt2_load(model_path);
		if (!m2)
			return -1;
		if (m2->num_params != tr->model->num_params) {
			fprintf(stderr, "ibc_gpt2: %s is another model\n", model_path);
			gpt2_destroy(m2);
			return -1;
		}
		memcpy(tr->model->params.mem, m2->params.mem, m2->num_params * sizeof(floatX));
		gpt2_destroy(m2);
	} else {
		gpt2_init_random(tr->model, o->init_seed);
	}
	if (spath[0] && model_path != o->init_model)
		return trainer_load_state(tr, spath);
	/* the start of the run: zero moments, step 0 */
	memset(tr->m, 0, tr->state_count * sizeof(float));
	memset(tr->v, 0, tr->state_count * sizeof(float));
	tr->step = 0;
	return 0;
}

static void format_eta(char *buf, size_t n, double s)
{
	if (s < 60)
		snprintf(buf, n, "%.0fs", s);
	else if (s < 3600)
		snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
	else
		snprintf(buf, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

int main(int argc, char **argv)
{
	struct options o;
	struct dp dp;
	struct trainer tr;
	struct tokenizer tok;
	struct gpt2 *model;
	int have_tok = 0;
	int rank0;
	int R;
	FILE *csv = NULL;
	double peak = 0;
	double flops_per_step;
	double sum_ms = 0;
	double sum_comm_ms = 0;
	double sum_exposed_ms = 0;
	int nsum = 0;
	int step0 = 0;		   /* tr.step when the loop starts (resume) */
	double first_ms = 0;	   /* the first step of this run, kept apart */
	double first_comm_ms = 0;
	double first_exposed_ms = 0;
	int tty = isatty(STDOUT_FILENO);
	double t_run;
	double val0 = -1;
	double val_last = -1;
	int ret = 1;
	int redo = 0;		   /* --elastic: the step is redone on fewer ranks */
	int last_ckpt = 0;	   /* step of the last checkpoint (ZeRO-1 --elastic goes back to it) */
	int fail_pending = 0;	   /* --elastic: a collective outside the step failed: agree on it */
	int V;			   /* the global batch is V * B * G sequences */

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse_args(argc, argv, &o) != 0)
		return 2;
	if (o.join ? dp_ibc_join(&dp, o.join, 120000, &o.tc.vranks) != 0 : dp_ibc_init(&dp) != 0)
		return 1;
	R = dp.nranks;
	rank0 = dp.rank == 0;
	pick_threads(&o, R);

	/* parameters and gradients in ibc_mem_alloc() memory (gpt2.h) */
	gpt2_set_buffer_alloc(dp_ibc_mem_alloc, dp_ibc_mem_free);
	/* model: resume > -e checkpoint > random init */
	if (o.resume || o.init_model) {
		model = gpt2_load(o.resume ? o.resume : o.init_model);
	} else {
		struct gpt2_config cfg;

		gpt2_config_preset(&cfg, o.depth, o.max_seq_len);
		model = gpt2_create(&cfg);
		if (model)
			gpt2_init_random(model, o.init_seed);
	}
	if (!model)
		goto out_dp;
	if (trainer_init(&tr, model, &o.tc, &dp, o.train_pattern, o.val_pattern) != 0)
		goto out_dp;
	if (o.resume) {
		char spath[4096];

		if (state_path_for(o.resume, spath, sizeof(spath)) != 0 ||
		    trainer_load_state(&tr, spath) != 0)
			goto out_tr;
	}
	if (o.join) {
		/* the job is between a shrink and the redo of its step: take its state and redo with it */
		if (trainer_bcast_state(&tr) != 0)
			goto out_tr;
		printf("elastic: joined as rank %d of %d at step %d\n", dp.rank, dp.nranks, tr.step + 1);
		redo = 1;
	}
	if (rank0 && o.gen_tokens > 0) {
		char why[512];

		have_tok = tokenizer_init(&tok, o.tokenizer, why, sizeof(why)) == 0;
		if (!have_tok)
			fprintf(stderr,
				"ibc_gpt2: WARN tokenizer (-k): %s; samples will be shown "
				"as token ids\n",
				why);
	}

	/*
	 * peak: given per rank, or measured per host (measure_job_peak()); a
	 * replacement joins a job that did this long ago, and prints nothing
	 * with it (rank 0 prints), so it times its own threads alone
	 */
	if (o.peak_gflops > 0)
		peak = o.peak_gflops * R;
	else if (o.join)
		peak = measure_peak_gflops() * R;
	else if (measure_job_peak(&dp, R, dp.rank, &peak) != 0)
		goto out_tok;
	V = tr.cfg.vranks;
	flops_per_step = gpt2_flops_per_token(&model->cfg, o.tc.T) * V * o.tc.B * o.tc.G * o.tc.T;

	if (rank0) {
		const struct gpt2_config *c = &model->cfg;

		printf(
		    "ibc_gpt2: GPT-2 L %d C %d NH %d V %d (Vp %d) maxT %d, %.2f M parameters%s\n",
		    c->num_layers, c->channels, c->num_heads, c->vocab_size, c->padded_vocab_size,
		    c->max_seq_len, model->num_params / 1e6,
		    o.resume	   ? " (resumed)"
		    : o.init_model ? " (loaded)"
				   : " (random init)");
		if (V != R)
			printf("ibc_gpt2: %d ranks share the global batch of %d (--vranks); below, R is %d\n",
			       R, V, V);
		printf("ibc_gpt2: R %d ranks x B %d x T %d x G %d = %d tokens per step, %d threads "
		       "per rank, %s, %d buckets (cap %.1f MiB)%s%s\n",
		       V, o.tc.B, o.tc.T, o.tc.G, V * o.tc.B * o.tc.T * o.tc.G, omp_threads(),
		       o.tc.zero ? "ZeRO-1" : "all-reduce", tr.nbuckets,
		       o.tc.bucket_elems * sizeof(floatX) / 1048576.0,
		       R > 1 ? (o.tc.overlap ? ", overlapped with backward" : ", after backward")
			     : "",
		       o.elastic ? ", elastic" : "");
		printf("ibc_gpt2: train %s: %zu samples in %d shards; val %s; peak %.1f GFLOP/s "
		       "(%s)\n",
		       o.train_pattern, tr.train.nsamples, tr.train.nshards,
		       tr.have_val ? o.val_pattern : "none", peak,
		       o.peak_gflops > 0 ? "given" : "measured: 1 thread x the cores of each host");
		if (o.log_csv) {
			csv = fopen(o.log_csv, "w");
			if (!csv) {
				fprintf(stderr, "ibc_gpt2: cannot write %s: %s\n", o.log_csv,
					strerror(errno));
				goto out_tok;
			}
			fprintf(
			    csv,
			    "step,train_loss,val_loss,lr,grad_norm,step_ms,tokens_per_s,"
			    "gflops,flops_frac,allreduce_ms,exposed_ms,hidden_frac,gather_ms\n");
		}
	}
	if (o.out_dir && rank0 && mkdir(o.out_dir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "ibc_gpt2: cannot create %s: %s\n", o.out_dir, strerror(errno));
		goto out_csv;
	}

	t_run = trainer_now_s();
	step0 = tr.step;
	last_ckpt = o.resume ? tr.step : 0;
	while (1) {
		int step = tr.step; /* steps done so far */
		int last = step >= o.stop_step;
		double val = -1;

		if (redo)
			goto run_step;
		if (tr.have_val &&
		    (step == 0 || last || (o.val_every > 0 && step % o.val_every == 0))) {
			val = trainer_val_loss(&tr);
			if (val < 0 && o.elastic && dp.ctx) {
				/* a rank died in the validation's all-reduce: the step's agreement handles it */
				fail_pending = 1;
				goto run_step;
			}
			if (val < 0)
				goto out_csv;
			if (val0 < 0)
				val0 = val;
			val_last = val;
			if (rank0)
				printf("step %5d | val loss %.4f\n", step, val);
			if (csv)
				fprintf(csv, "%d,,%.6f,,,,,,,,,,\n", step, val);
		}
		if (rank0 && o.gen_tokens > 0 && step > 0 &&
		    (last || (o.sample_every > 0 && step % o.sample_every == 0)))
			print_sample(tr.model, have_tok ? &tok : NULL, &o, o.tc.T, step);
		if (o.out_dir && step > 0 &&
		    (last || (o.ckpt_every > 0 && step % o.ckpt_every == 0))) {
			if (step != last_ckpt && save_checkpoint(&tr, &o) != 0) {
				/* ZeRO-1 gathers the moments: a rank may die in it; this checkpoint does not count */
				if (!(o.elastic && dp.ctx))
					goto out_csv;
				fail_pending = 1;
				goto run_step;
			}
			last_ckpt = step;
		}
		if (last)
			break;

run_step:
		if (o.elastic && dp.ctx) {
			/*
			 * Every rank agrees on the step's success before it changes a
			 * parameter; when ranks are dead the others shrink and redo the
			 * same step from the same parameters and moments, with the same
			 * global batch (train.h), so nothing is lost or counted twice.
			 */
			double t0 = trainer_now_s();
			int rc = fail_pending ? -1 : trainer_step_grads(&tr);
			double t1 = trainer_now_s();
			double t2;
			int all_ok = 0;
			int nfailed = 0;
			int *failed = calloc((size_t)R, sizeof(int));
			char who[256] = "";
			int old_R = R;

			if (!failed || dp_ibc_agree_step(&dp, rc == 0, &all_ok, failed, &nfailed) != 0) {
				free(failed);
				goto out_csv;
			}
			t2 = trainer_now_s();
			fail_pending = 0;
			for (int i = 0; i < nfailed; i++)
				snprintf(who + strlen(who), sizeof(who) - strlen(who), "%s%d",
					 i ? "," : "", failed[i]);
			free(failed);
			if (!all_ok && nfailed == 0) {
				fprintf(stderr, "ibc_gpt2: rank %d: step %d failed on a rank that is alive (see above); stopping\n",
					dp.rank, step + 1);
				goto out_csv;
			}
			if (!all_ok) {
				trainer_abandon(&tr);
				if (dp_ibc_shrink(&dp) != 0 || trainer_resize(&tr, &dp) != 0)
					goto out_csv;
				R = dp.nranks;
				rank0 = dp.rank == 0;
				if (o.tc.zero) {
					/* ZeRO-1: the dead ranks' optimizer shards are gone */
					double t3 = trainer_now_s();

					if (reload_checkpoint(&tr, &o, last_ckpt) != 0)
						goto out_csv;
					if (rank0)
						printf("elastic: step %d: rank(s) %s of %d died; the step failed after %.0f ms, agreement %.0f ms, shrink %.0f ms; ZeRO-1: their optimizer shards are lost, back to the checkpoint of step %d on %d ranks (%d step(s) redone, reload %.0f ms)\n",
						       step + 1, who, old_R, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
						       (t3 - t2) * 1e3, last_ckpt, R, step + 1 - last_ckpt,
						       (trainer_now_s() - t3) * 1e3);
					redo = 1;
					continue;
				}
				if (rank0)
					printf("elastic: step %d: rank(s) %s of %d died; the step failed after %.0f ms, agreement %.0f ms, shrink %.0f ms; redoing step %d on %d ranks\n",
					       step + 1, who, old_R, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
					       (trainer_now_s() - t2) * 1e3, step + 1, R);
				if (o.join_dir) {
					double t3 = trainer_now_s();
					int grown = 0;

					if (dp_ibc_offer_join(&dp, o.join_dir, o.join_wait_ms, V, &grown) != 0)
						goto out_csv;
					if (grown) {
						double t4 = trainer_now_s();

						if (trainer_resize(&tr, &dp) != 0 || trainer_bcast_state(&tr) != 0)
							goto out_csv;
						R = dp.nranks;
						if (rank0)
							printf("elastic: step %d: a replacement joined as rank %d: %d ranks; waited and grew %.0f ms, state sent %.0f ms\n",
							       step + 1, R - 1, R, (t4 - t3) * 1e3,
							       (trainer_now_s() - t4) * 1e3);
					}
				}
				redo = 1;
				continue;
			}
			if (trainer_step_apply(&tr) != 0) {
				/*
				 * Only ZeRO-1's parameter all-gather can fail here (a rank
				 * died after the agreement): the update is half done, so the
				 * next agreement finds the dead and goes back to the last
				 * checkpoint (the ranks whose all-gather completed meet it
				 * in their next step)
				 */
				if (!o.tc.zero)
					goto out_csv;
				fail_pending = 1;
				redo = 1;
				continue;
			}
			if (redo && rank0) {
				struct timespec now;

				clock_gettime(CLOCK_REALTIME, &now);
				printf("elastic: step %d redone on %d ranks, done at unix time %.6f\n",
				       tr.step, R, now.tv_sec + 1e-9 * now.tv_nsec);
			}
			redo = 0;
		} else if (trainer_step(&tr) != 0) {
			goto out_csv;
		}
		{
			const struct step_stats *s = &tr.stats;
			double tok_s = V * o.tc.B * o.tc.T * o.tc.G / (s->step_ms / 1e3);
			double gflops = flops_per_step / (s->step_ms / 1e3) / 1e9;

			if (tr.step > step0 + 1) { /* the first step pays one-time costs */
				sum_ms += s->step_ms;
				sum_comm_ms += s->comm_ms;
				sum_exposed_ms += s->exposed_ms;
				nsum++;
			} else {
				first_ms = s->step_ms;
				first_comm_ms = s->comm_ms;
				first_exposed_ms = s->exposed_ms;
			}
			if (rank0 && !o.quiet) {
				char eta[64] = "";
				char comm[96] = "";

				if (R > 1)
					snprintf(comm, sizeof(comm),
						 " | allreduce %.1f ms, %.0f%% hidden", s->comm_ms,
						 100 * s->hidden_frac);
				if (R > 1 && o.tc.zero)
					snprintf(comm + strlen(comm), sizeof(comm) - strlen(comm),
						 ", gather %.1f ms", s->gather_ms);
				if (tty) {
					char t[16];
					int done = tr.step * 20 / o.stop_step;

					format_eta(t, sizeof(t),
						   (o.stop_step - tr.step) *
						       (nsum ? sum_ms / nsum : s->step_ms) / 1e3);
					snprintf(eta, sizeof(eta), " [%.*s%.*s] eta %s", done,
						 "####################", 20 - done,
						 "....................", t);
				}
				printf("step %5d/%d | loss %.4f | lr %.2e | norm %.3f | %.1f ms | "
				       "%.0f tok/s | %.2f GFLOP/s %.1f%%%s%s\n",
				       tr.step, o.tc.max_steps, s->loss, s->lr, s->grad_norm,
				       s->step_ms, tok_s, gflops,
				       peak > 0 ? 100 * gflops / peak : 0, comm, eta);
			}
			if (csv)
				fprintf(
				    csv,
				    "%d,%.6f,,%.6e,%.6f,%.3f,%.1f,%.4f,%.5f,%.3f,%.3f,%.4f,%.3f\n",
				    tr.step, s->loss, s->lr, s->grad_norm, s->step_ms, tok_s,
				    gflops, peak > 0 ? gflops / peak : 0, s->comm_ms, s->exposed_ms,
				    s->hidden_frac, s->gather_ms);
		}
	}
	if (rank0) {
		printf("ibc_gpt2: done %d steps in %.1f s; ", tr.step, trainer_now_s() - t_run);
		if (nsum) {
			printf("mean step %.1f ms (steps %d..%d)", sum_ms / nsum, step0 + 2,
			       tr.step);
		} else if (tr.step > step0) {
			/* one step: report it, one-time costs included, and say so */
			sum_ms = first_ms;
			sum_comm_ms = first_comm_ms;
			sum_exposed_ms = first_exposed_ms;
			nsum = 1;
			printf("mean step %.1f ms (step %d only, with its one-time costs: run 2 or "
			       "more steps to leave the first out)",
			       sum_ms, tr.step);
		} else {
			printf("no steps run");
		}
		if (R > 1 && nsum && sum_comm_ms > 0) {
			double hidden = 1 - sum_exposed_ms / sum_comm_ms;

			printf(", all-reduce %.1f ms, %.0f%% hidden", sum_comm_ms / nsum,
			       100 * (hidden > 0 ? hidden : 0));
		}
		if (val0 >= 0)
			printf("; val loss %.4f -> %.4f", val0, val_last);
		printf("\n");
	}
	if (o.print_hash) {
		/* one line per rank, in rank order */
		for (int r = 0; r < R; r++) {
			if (r == dp.rank)
				printf("param hash rank %d: %016llx\n", dp.rank,
				       (unsigned long long)trainer_param_hash(&tr));
			fflush(stdout);
			if (dp_ibc_barrier(&dp) != 0)
				goto out_csv;
		}
	}
	if (rank0 && o.dump_params &&
	    dump_floats(o.dump_params, tr.model->params.mem, tr.model->num_params) != 0)
		goto out_csv;
	if (rank0 && o.dump_grads) {
		if (o.tc.zero && R > 1) {
			fprintf(stderr,
				"ibc_gpt2: --dump-grads needs --zero 0 (ZeRO-1 keeps shards)\n");
			goto out_csv;
		}
		if (dump_floats(o.dump_grads, tr.model->grads.mem, tr.model->num_params) != 0)
			goto out_csv;
	}
	ret = 0;

out_csv:
	if (csv)
		fclose(csv);
out_tok:
	if (have_tok)
		tokenizer_free(&tok);
out_tr:
	trainer_free(&tr);
out_dp:
	if (ret != 0 && dp.ctx) {
		/* a local error: the others may be in a collective this rank will never call */
		fprintf(stderr, "ibc_gpt2: rank %d: stopping after the error above; aborting the communicator so that the other ranks stop too\n",
			dp.rank);
		dp_ibc_abort(&dp);
	} else {
		dp_ibc_fini(&dp);
	}
	return ret;
}
