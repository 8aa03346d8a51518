/* SPDX-License-Identifier: MIT */
/*
 * ibc_p2p - point-to-point RDMA write bandwidth and latency through
 * ibcoll's verbs transport, in the manner of perftest's ib_write_bw and
 * ib_write_lat: a server and a client exchange connection information
 * over a TCP socket (like perftest), then the client writes to the server.
 *
 * It measures the transport's own data path through its internal endpoint
 * API (src/transport/ib/ib.h): a message up to the eager limit
 * (IBC_IB_EAGER_BYTES) is one RDMA WRITE WITH IMM into the receiver's slot,
 * a larger one a receiver-driven clear-to-send followed by RDMA WRITE(s)
 * ending with WRITE WITH IMM, exactly what collectives use; it does not go
 * through the communicator, the bootstrap or the net layer.
 *
 *   server:  ibc_p2p [-d rxe1] [options]
 *   client:  ibc_p2p [-d rxe0] [options] SERVER_HOST
 *
 * Bandwidth: the client keeps a window of messages in flight; the rate is
 * measured on the server from the first receive posted to the last one
 * completed (payload in memory). Latency: ping-pong, one-way = RTT / 2,
 * receives pre-posted like ib_write_lat's polling on memory. Output: one
 * line per size with MiB/s (2^20 bytes, perftest's unit) and GB/s (10^9).
 * Exit status 0, or 1 with the transport's error (e.g. the peer died).
 */
#include "config.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/param.h"
#include "base/util.h"
#include "transport/ib/ib.h"

struct opts {
	char dev[IBC_IB_NAME_LEN];
	int port_num;           /* device port */
	int gid_index;
	int tcp_port;
	const char *server;     /* NULL: we are the server */
	size_t min_bytes;
	size_t max_bytes;
	int factor;
	long iters;             /* 0: auto from max_total_bytes */
	size_t total_bytes;     /* auto iterations: about this many bytes per size */
	long warmup;
	int test_bw;
	int test_lat;
	int window;
	int qps;
	int depth;
	int check;
	int timeout_ms;
	int sleep_idle;         /* 1: every idle wait sleeps on the completion channel */
	int poll_all;           /* 1: never sleep, not even the bandwidth receiver */
};

static struct ibc_ib_ctx *g_ctx;
static int g_failed;
static int g_oob_fd = -1;       /* the out-of-band socket, watched for the peer's death */
static int g_is_client;
static uint64_t g_next_oob_check_ms;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ibc_p2p: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

static void on_fail(void *arg, ibc_status_t st, int peer, const char *why)
{
	(void)arg;
	g_failed = 1;
	fprintf(stderr, "ibc_p2p: %s: peer rank %d (%s): %s\n", ibc_status_str(st), peer,
		peer == 0 ? "client" : "server", why);
}

static ibc_status_t on_desc_check(void *arg, int peer, const struct ibc_msg_desc *mine,
				  size_t my_nbytes, const struct ibc_msg_desc *theirs,
				  size_t their_nbytes)
{
	(void)arg;
	if (!memcmp(mine, theirs, sizeof(*mine)) && my_nbytes == their_nbytes)
		return IBC_OK;
	fprintf(stderr, "ibc_p2p: message mismatch with peer %d: %zu vs %zu bytes, seq %u vs %u\n",
		peer, my_nbytes, their_nbytes, mine->seq, theirs->seq);
	return IBC_ERR_INVALID_USAGE;
}

/* ---------------------------------------------------------------------- */
/* out-of-band TCP                                                        */
/* ---------------------------------------------------------------------- */

static void xfer(int fd, void *buf, size_t n, int send_it)
{
	uint8_t *p = buf;

	while (n) {
		ssize_t r = send_it ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("out-of-band connection lost (%s): the peer exited",
			    r < 0 ? strerror(errno) : "closed");
		p += r;
		n -= (size_t)r;
	}
}

static void oob_sync(int fd)
{
	char c = 's';

	xfer(fd, &c, 1, 1);
	xfer(fd, &c, 1, 0);
}

static int oob_connect(const struct opts *o)
{
	struct addrinfo hints;
	struct addrinfo *ai = NULL;
	char port[16];
	uint64_t deadline = ibc_time_ms() + 30000;
	int one = 1;
	int fd = -1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%d", o->tcp_port);
	if (o->server) {
		if (getaddrinfo(o->server, port, &hints, &ai) != 0 || !ai)
			die("cannot resolve %s", o->server);
		/* the server may start later: retry for 30 s */
		for (;;) {
			fd = socket(ai->ai_family, SOCK_STREAM, 0);
			if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
				break;
			if (fd >= 0)
				close(fd);
			if (ibc_time_ms() > deadline)
				die("cannot connect to %s:%s: %s", o->server, port, strerror(errno));
			usleep(100000);
		}
		freeaddrinfo(ai);
	} else {
		struct sockaddr_in sa;
		int lfd = socket(AF_INET, SOCK_STREAM, 0);

		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)o->tcp_port);
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
			die("cannot listen on port %d: %s", o->tcp_port, strerror(errno));
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			die("accept failed: %s", strerror(errno));
		close(lfd);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* ---------------------------------------------------------------------- */
/* transport helpers                                                      */
/* ---------------------------------------------------------------------- */

/*
 * A sender waiting for a clear-to-send from a dead receiver has nothing in
 * flight, so verbs reports nothing (a communicator's bootstrap liveness
 * catches that case); the benchmark watches its out-of-band socket instead.
 */
static void oob_check(void)
{
	struct pollfd pfd = { g_oob_fd, POLLIN | POLLRDHUP, 0 };
	uint64_t now_ms = ibc_time_coarse_ns() / 1000000; /* see wait_req() */
	char c;

	if (g_oob_fd < 0 || now_ms < g_next_oob_check_ms)
		return;
	g_next_oob_check_ms = now_ms + 20;
	if (poll(&pfd, 1, 0) <= 0)
		return;
	if ((pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) ||
	    recv(g_oob_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
		fprintf(stderr, "ibc_p2p: peer rank %d (%s) closed the out-of-band connection during the test: it exited or died\n",
			g_is_client ? 1 : 0, g_is_client ? "server" : "client");
		exit(1);
	}
}

static void progress(const struct opts *o)
{
	ibc_ib_ctx_progress(g_ctx);
	if (g_failed)
		exit(1);
	oob_check();
	if (o->sleep_idle)
		ibc_ib_ctx_wait(g_ctx, 100);
}

static void wait_req(const struct opts *o, struct ibc_treq *r, const char *what)
{
	/* the coarse clock: a fine read is a system call where the clock source is
	 * hpet (the test VM: 0.9 us a read), and this loop runs while a message flies */
	uint64_t deadline = ibc_time_coarse_ns() / 1000000 + (uint64_t)o->timeout_ms;

	while (!ibc_treq_is_done(r)) {
		progress(o);
		if (ibc_time_coarse_ns() / 1000000 > deadline)
			die("%s did not complete within %d ms", what, o->timeout_ms);
	}
	if (r->status != IBC_OK)
		die("%s failed: %s", what, ibc_status_str(r->status));
}

static int g_ll; /* --ll: messages carry IBC_DESC_F_LL */

static struct ibc_msg_desc desc_for(uint32_t seq, size_t nbytes)
{
	struct ibc_msg_desc d;

	memset(&d, 0, sizeof(d));
	if (g_ll)
		d.flags = IBC_DESC_F_LL;
	d.seq = seq;
	d.coll = 7; /* IBC_COLL_SEND */
	d.dtype = IBC_UINT8;
	d.count = nbytes;
	d.root = -1;
	return d;
}

static long iters_for(const struct opts *o, size_t n)
{
	long it;

	if (o->iters > 0)
		return o->iters;
	it = (long)(o->total_bytes / (n ? n : 1));
	return IBC_MAX(5, IBC_MIN(it, 1000));
}

static uint8_t pat(long msg, size_t j)
{
	return (uint8_t)(msg * 29 + (long)j * 7 + 3);
}

/* ---------------------------------------------------------------------- */
/* bandwidth                                                              */
/* ---------------------------------------------------------------------- */

struct bw_res {
	double secs;
	long bad;               /* messages that failed the data check */
};

static void bw_run(const struct opts *o, int fd, struct ibc_ib_conn *conn, size_t n, long iters,
		   uint32_t seq, uint8_t **bufs, int nbufs, int is_sender, struct bw_res *res)
{
	struct ibc_treq *reqs = calloc((size_t)o->window, sizeof(*reqs));
	long *msg_of = calloc((size_t)o->window, sizeof(long));
	struct ibc_msg_desc d = desc_for(seq, n);
	long posted = 0;
	long done = 0;
	uint64_t t0;
	uint64_t deadline;

	res->bad = 0;
	oob_sync(fd);
	t0 = ibc_time_ns();
	deadline = ibc_time_ms() + (uint64_t)o->timeout_ms;
	while (done < iters) {
		/* post into free window slots (slot = message index % window) */
		while (posted < iters && posted - done < o->window) {
			int s = (int)(posted % o->window);
			uint8_t *b = bufs[s % nbufs];

			if (is_sender && o->check) {
				size_t j;

				for (j = 0; j < n; j++)
					b[j] = pat(posted, j);
			}
			msg_of[s] = posted;
			if (is_sender)
				ibc_ib_conn_isend(conn, b, n, &d, &reqs[s]);
			else
				ibc_ib_conn_irecv(conn, b, n, &d, &reqs[s]);
			posted++;
		}
		/* retire completions in order */
		while (done < posted && ibc_treq_is_done(&reqs[done % o->window])) {
			int s = (int)(done % o->window);

			if (reqs[s].status != IBC_OK)
				die("message %ld of %zu bytes failed: %s", done, n,
				    ibc_status_str(reqs[s].status));
			if (!is_sender && o->check) {
				size_t j;
				const uint8_t *b = bufs[s % nbufs];

				for (j = 0; j < n; j++)
					if (b[j] != pat(msg_of[s], j)) {
						res->bad++;
						break;
					}
			}
			done++;
		}
		if (done < iters) {
			int before = ibc_treq_is_done(&reqs[done % o->window]);

			progress(o);
			/* the receiver, like ib_write_bw's server, leaves the CPU to the
			 * NIC (rxe: the kernel) while idle: sleep on the CQ channel */
			if (!is_sender && !o->poll_all && !o->sleep_idle && !before &&
			    !ibc_treq_is_done(&reqs[done % o->window]))
				ibc_ib_ctx_wait(g_ctx, 10000);
			if (ibc_time_ms() > deadline)
				die("bandwidth test of %zu bytes: %ld of %ld messages done after %d ms",
				    n, done, iters, o->timeout_ms);
		}
	}
	res->secs = (double)(ibc_time_ns() - t0) / 1e9;
	free(reqs);
	free(msg_of);
}

/* ---------------------------------------------------------------------- */
/* latency                                                                */
/* ---------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void lat_run(const struct opts *o, int fd, struct ibc_ib_conn *conn, size_t n, long iters,
		    uint32_t seq, uint8_t *sbuf, uint8_t *rbuf, int is_client, double *samples)
{
	struct ibc_msg_desc d = desc_for(seq, n);
	struct ibc_treq rr[2];
	struct ibc_treq sr;
	long i;

	oob_sync(fd);
	/* pre-post the first receive (a rendezvous one has its clear-to-send at the peer) */
	ibc_ib_conn_irecv(conn, rbuf, n, &d, &rr[0]);
	oob_sync(fd);
	for (i = 0; i < iters; i++) {
		struct ibc_treq *cur = &rr[i % 2];
		struct ibc_treq *nxt = &rr[(i + 1) % 2];
		uint64_t t0 = ibc_time_ns();

		if (is_client) {
			ibc_ib_conn_isend(conn, sbuf, n, &d, &sr);
			if (i + 1 < iters)
				ibc_ib_conn_irecv(conn, rbuf, n, &d, nxt);
			wait_req(o, cur, "latency receive");
			wait_req(o, &sr, "latency send");
			samples[i] = (double)(ibc_time_ns() - t0) / 2e3;
		} else {
			wait_req(o, cur, "latency receive");
			if (i + 1 < iters)
				ibc_ib_conn_irecv(conn, rbuf, n, &d, nxt);
			ibc_ib_conn_isend(conn, sbuf, n, &d, &sr);
			wait_req(o, &sr, "latency send");
		}
	}
}

/* ---------------------------------------------------------------------- */
/* main                                                                   */
/* ---------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ibc_p2p [options]              (server)\n"
		"       ibc_p2p [options] SERVER_HOST  (client: writes to the server)\n"
		"Measures RDMA write bandwidth and latency through ibcoll's verbs transport via its\n"
		"internal endpoint API (eager RDMA WRITE WITH IMM, or clear-to-send + RDMA WRITE WITH\n"
		"IMM above IBC_IB_EAGER_BYTES, as used by collectives), not through the communicator;\n"
		"the peers meet over TCP like perftest.\n"
		"  -d, --ib-dev DEV[:PORT]  verbs device (default: first ACTIVE port, IBC_IB_HCA applies)\n"
		"  -x, --gid-index N        GID index (default: auto-selection, see IBC_IB_GID_INDEX)\n"
		"  -p, --port N             TCP port of the out-of-band exchange (default 18515)\n"
		"  -b, --min-bytes N        smallest message (default 2; k/m suffixes)\n"
		"  -e, --max-bytes N        largest message (default 8m)\n"
		"  -f, --factor N           size multiplier (default 2)\n"
		"  -n, --iters N            iterations per size (default: about --total bytes, 5..1000)\n"
		"  -B, --total N            bytes per size for automatic iterations (default 64m)\n"
		"  -w, --warmup N           warm-up iterations per size (default 2)\n"
		"  -t, --test bw|lat|both   what to measure (default both)\n"
		"  -W, --window N           messages in flight for bandwidth (default: credits)\n"
		"  -q, --qps N              QPs per connection (default IBC_IB_QPS_PER_CONN)\n"
		"  -D, --depth N            credits per direction (default IBC_IB_DEPTH)\n"
		"  -c, --check              verify every byte received (slower)\n"
		"  -s, --sleep              every side sleeps on the completion channel when idle\n"
		"                           (default: the bandwidth receiver sleeps, everything else polls,\n"
		"                           as ib_write_bw's passive server and polling client)\n"
		"  -P, --poll               busy-poll everywhere, the bandwidth receiver too\n"
		"  -L, --ll                 messages up to IBC_LL_MAX_BYTES by the LL path (written into\n"
		"                           the peer's ring with a flag per line, polled in memory; both\n"
		"                           ends must say it), larger ones as without it\n"
		"  -T, --timeout-ms N       bound on each size's test (default 120000)\n"
		"Output: bandwidth in MiB/s (2^20 bytes/s, perftest's unit) and GB/s (10^9 bytes/s);\n"
		"latency one-way (RTT/2) in microseconds.\n");
}

static size_t parse_size(const char *s)
{
	int64_t v;

	if (ibc_param_parse_int(s, &v) != 0 || v < 0)
		die("bad size '%s'", s);
	return (size_t)v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "ib-dev", required_argument, NULL, 'd' },
		{ "gid-index", required_argument, NULL, 'x' },
		{ "port", required_argument, NULL, 'p' },
		{ "min-bytes", required_argument, NULL, 'b' },
		{ "max-bytes", required_argument, NULL, 'e' },
		{ "factor", required_argument, NULL, 'f' },
		{ "iters", required_argument, NULL, 'n' },
		{ "total", required_argument, NULL, 'B' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "test", required_argument, NULL, 't' },
		{ "window", required_argument, NULL, 'W' },
		{ "qps", required_argument, NULL, 'q' },
		{ "depth", required_argument, NULL, 'D' },
		{ "check", no_argument, NULL, 'c' },
		{ "sleep", no_argument, NULL, 's' },
		{ "poll", no_argument, NULL, 'P' },
		{ "ll", no_argument, NULL, 'L' },
		{ "timeout-ms", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ibc_ib_port_desc ports[IBC_IB_MAX_PORTS];
	struct ibc_ib_hca_spec spec;
	struct ibc_ib_params prm;
	struct ibc_ib_ctx_cb cb = { NULL, on_fail, on_desc_check };
	struct ibc_ib_conn *conn;
	struct ibc_ib_conn_info mine;
	struct ibc_ib_conn_info theirs;
	uint8_t wire[IBC_IB_CONN_INFO_WIRE_BYTES];
	struct opts o;
	uint8_t **bufs;
	uint8_t *sbuf;
	uint8_t *rbuf;
	double *samples;
	size_t n;
	int nbufs;
	int is_client;
	int nports = 0;
	int fd;
	int c;
	int i;
	uint32_t seq = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&o, 0, sizeof(o));
	o.port_num = 1;
	o.gid_index = -1;
	o.tcp_port = 18515;
	o.min_bytes = 2;
	o.max_bytes = 8u << 20;
	o.factor = 2;
	o.total_bytes = 64u << 20;
	o.warmup = 2;
	o.test_bw = o.test_lat = 1;
	o.timeout_ms = 120000;
	while ((c = getopt_long(argc, argv, "d:x:p:b:e:f:n:B:w:t:W:q:D:csPLT:h", lo, NULL)) != -1) {
		switch (c) {
		case 'd': {
			char *colon = strchr(optarg, ':');

			if (colon) {
				o.port_num = atoi(colon + 1);
				*colon = '\0';
			}
			snprintf(o.dev, sizeof(o.dev), "%s", optarg);
			break;
		}
		case 'x': o.gid_index = atoi(optarg); break;
		case 'p': o.tcp_port = atoi(optarg); break;
		case 'b': o.min_bytes = parse_size(optarg); break;
		case 'e': o.max_bytes = parse_size(optarg); break;
		case 'f': o.factor = atoi(optarg); break;
		case 'n': o.iters = atol(optarg); break;
		case 'B': o.total_bytes = parse_size(optarg); break;
		case 'w': o.warmup = atol(optarg); break;
		case 't':
			o.test_bw = !strcmp(optarg, "bw") || !strcmp(optarg, "both");
			o.test_lat = !strcmp(optarg, "lat") || !strcmp(optarg, "both");
			if (!o.test_bw && !o.test_lat)
				die("--test takes bw, lat or both");
			break;
		case 'W': o.window = atoi(optarg); break;
		case 'q': o.qps = atoi(optarg); break;
		case 'D': o.depth = atoi(optarg); break;
		case 'c': o.check = 1; break;
		case 's': o.sleep_idle = 1; break;
		case 'P': o.poll_all = 1; break;
		case 'L': g_ll = 1; break;
		case 'T': o.timeout_ms = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc)
		o.server = argv[optind];
	if (o.factor < 2 || o.min_bytes > o.max_bytes)
		die("need --factor >= 2 and --min-bytes <= --max-bytes");
	is_client = o.server != NULL;

	ibc_ib_params_from_env(&prm);
	if (o.gid_index >= 0)
		prm.gid_index = o.gid_index;
	if (o.qps > 0)
		prm.nqps = IBC_MIN(o.qps, IBC_IB_MAX_QPS);
	if (o.depth > 0)
		prm.depth = IBC_MIN(o.depth, IBC_IB_MAX_DEPTH);
	if (o.window <= 0)
		o.window = prm.depth;
	if (!o.dev[0]) {
		if (ibc_ib_hca_parse(ibc_param_ib_hca(), &spec) != IBC_OK)
			die("bad IBC_IB_HCA");
		ibc_ib_ports_list(&spec, ports, IBC_IB_MAX_PORTS, &nports);
		if (nports == 0)
			die("no ACTIVE verbs port");
		snprintf(o.dev, sizeof(o.dev), "%s", ports[0].dev_name);
		o.port_num = ports[0].port;
	}
	if (ibc_ib_ctx_create(o.dev, o.port_num, &prm, &cb, &g_ctx) != IBC_OK)
		die("cannot open %s:%d: %s", o.dev, o.port_num, ibc_last_error());
	if (ibc_ib_conn_create(g_ctx, is_client ? 1 : 0, o.server ? o.server : "client", &conn))
		die("cannot create the connection: %s", ibc_last_error());
	fd = oob_connect(&o);
	g_oob_fd = fd;
	g_is_client = is_client;
	ibc_ib_conn_local_info(conn, &mine);
	ibc_ib_conn_info_pack(&mine, wire);
	xfer(fd, wire, sizeof(wire), 1);
	xfer(fd, wire, sizeof(wire), 0);
	if (ibc_ib_conn_info_unpack(wire, &theirs) != IBC_OK ||
	    ibc_ib_conn_establish(conn, &theirs) != IBC_OK)
		die("cannot connect to the peer: %s", ibc_last_error());
	oob_sync(fd); /* both QPs are in RTS: nothing sent now is dropped */

	nbufs = o.check ? o.window : 1;
	bufs = calloc((size_t)nbufs, sizeof(*bufs));
	for (i = 0; i < nbufs; i++) {
		bufs[i] = aligned_alloc(4096, IBC_ALIGN_UP(o.max_bytes, 4096));
		if (!bufs[i])
			die("cannot allocate %zu bytes", o.max_bytes);
		memset(bufs[i], 0, o.max_bytes);
	}
	sbuf = aligned_alloc(4096, IBC_ALIGN_UP(o.max_bytes, 4096));
	rbuf = aligned_alloc(4096, IBC_ALIGN_UP(o.max_bytes, 4096));
	memset(sbuf, 0x5a, o.max_bytes);
	memset(rbuf, 0, o.max_bytes);
	samples = calloc(1000 > o.iters ? 1000 : (size_t)o.iters, sizeof(double));

	if (is_client) {
		char gs[64] = "-";

		if (ibc_ib_conn_gid_index(conn) >= 0)
			snprintf(gs, sizeof(gs), "%d", ibc_ib_conn_gid_index(conn));
		printf("# ibc_p2p: RDMA write through ibcoll's verbs transport (internal endpoint API: eager RDMA WRITE WITH IMM, or clear-to-send + RDMA WRITE WITH IMM)\n");
		printf("# local %s:%d, peer %s:%d, path mtu %s, gid idx %s, %d QPs, %d credits, window %d, inline <= %d bytes, bounce <= %zu bytes, eager <= %zu bytes%s\n",
		       o.dev, o.port_num, theirs.dev_name, theirs.port,
		       ibc_ib_mtu_str(ibc_ib_conn_mtu(conn)), gs, ibc_ib_conn_nqps(conn), prm.depth,
		       o.window, prm.inline_bytes, prm.bounce_bytes, ibc_ib_conn_eager_max(conn),
		       o.check ? ", data checked" : "");
	}
	if (o.test_bw) {
		if (is_client) {
			printf("# bandwidth: client -> server, measured at the server (first receive posted .. last payload in memory)\n");
			printf("#%11s %7s %14s %12s %12s\n", "bytes", "iters", "BW avg[MiB/s]",
			       "BW avg[GB/s]", "msg rate[Mpps]");
		}
		for (n = o.min_bytes; n <= o.max_bytes; n = n ? n * (size_t)o.factor : 1) {
			long it = iters_for(&o, n);
			struct bw_res wr;
			struct bw_res r;

			if (o.warmup > 0)
				bw_run(&o, fd, conn, n, o.warmup, seq, bufs, nbufs, is_client, &wr);
			bw_run(&o, fd, conn, n, it, seq, bufs, nbufs, is_client, &r);
			seq++;
			if (is_client) {
				xfer(fd, &r, sizeof(r), 0);
				printf("%12zu %7ld %14.2f %12.4f %14.6f%s\n", n, it,
				       (double)n * (double)it / r.secs / 1048576.0,
				       (double)n * (double)it / r.secs / 1e9, (double)it / r.secs / 1e6,
				       r.bad ? "  DATA ERRORS" : "");
				if (r.bad)
					fprintf(stderr, "ibc_p2p: %ld of %ld messages of %zu bytes arrived wrong\n",
						r.bad, it, n);
			} else {
				xfer(fd, &r, sizeof(r), 1);
			}
			fflush(stdout);
			if (n == 0)
				n = 1;
		}
	}
	if (o.test_lat) {
		if (is_client) {
			printf("# latency: ping-pong, one-way = RTT/2, receives pre-posted\n");
			printf("#%11s %7s %10s %12s %10s %10s %10s\n", "bytes", "iters", "t_min[us]",
			       "t_typical[us]", "t_avg[us]", "t_max[us]", "t_99%[us]");
		}
		for (n = o.min_bytes; n <= o.max_bytes; n = n ? n * (size_t)o.factor : 1) {
			long it = iters_for(&o, n);
			double sum = 0;
			long k;

			if (o.warmup > 0)
				lat_run(&o, fd, conn, n, o.warmup, seq, sbuf, rbuf, is_client, samples);
			lat_run(&o, fd, conn, n, it, seq, sbuf, rbuf, is_client, samples);
			seq++;
			if (is_client) {
				qsort(samples, (size_t)it, sizeof(double), cmp_double);
				for (k = 0; k < it; k++)
					sum += samples[k];
				printf("%12zu %7ld %10.2f %12.2f %10.2f %10.2f %10.2f\n", n, it, samples[0],
				       samples[it / 2], sum / (double)it, samples[it - 1],
				       samples[(long)((double)it * 0.99) < it ? (long)((double)it * 0.99) : it - 1]);
			}
			fflush(stdout);
			if (n == 0)
				n = 1;
		}
	}
	oob_sync(fd);
	g_oob_fd = -1;
	close(fd);
	ibc_ib_ctx_destroy(g_ctx);
	for (i = 0; i < nbufs; i++)
		free(bufs[i]);
	free(bufs);
	free(sbuf);
	free(rbuf);
	free(samples);
	return 0;
}
