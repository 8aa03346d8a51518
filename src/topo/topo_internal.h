/* SPDX-License-Identifier: MIT */
/*
 * topo_internal.h - the contract between topo_common.c (decisions) and the
 * backend built in (topo_hwloc.c or topo_flat.c), plus small helpers both
 * backends use. Private to src/topo/ and its tests.
 */
#ifndef IBC_TOPO_INTERNAL_H
#define IBC_TOPO_INTERNAL_H

#include "topo/topo.h"

/* levels of the spread key: NUMA node, host bridge, PCI device (bus:dev) */
#define IBC_TOPO_KEY_LEVELS 3

/* ---- provided by the backend ---- */

/* index of NIC @nic in the topology, -1 when unknown */
int ibc_topo_nic_find(struct ibc_topo *t, const char *nic);

/*
 * Locality key of NIC @nic (an index from ibc_topo_nic_find(), or -1 for an
 * unknown NIC): key[0] NUMA node, key[1] host bridge, key[2] PCI device,
 * each a number that is equal for NICs sharing that level; unknown levels
 * are LONG_MAX so that such NICs sort last.
 */
void ibc_topo_nic_spread_key(struct ibc_topo *t, int nic, long key[IBC_TOPO_KEY_LEVELS]);

/* class between GPU @gpu (valid index) and NIC index @nic (-1: unknown) */
enum ibc_topo_dist ibc_topo_dist_of(struct ibc_topo *t, int gpu, int nic);

/* "" or a note appended to every reason ("; flat topology: ...") */
const char *ibc_topo_dist_note(struct ibc_topo *t);

/* ---- provided by topo_common.c for the backends ---- */

/* strcmp, except that runs of digits compare as numbers (mlx5_2 < mlx5_10) */
int ibc_topo_natural_cmp(const char *a, const char *b);

/*
 * The entry names of directory @dir (no dot files), sorted with
 * ibc_topo_natural_cmp(). A missing directory gives 0 names and IBC_OK.
 * Free with ibc_topo_names_free().
 */
ibc_status_t ibc_topo_list_dir(const char *dir, char ***names_p, int *n_p);
void ibc_topo_names_free(char **names, int n);

/*
 * Parse a PCI bus id "[domain:]bus:dev.fn" (hex, any case, any domain width).
 * Return: 0, or -1 when malformed.
 */
int ibc_topo_parse_busid(const char *s, unsigned *dom_p, unsigned *bus_p, unsigned *dev_p,
			 unsigned *fn_p);

/* snprintf appending at strlen(@buf); never overflows, truncates silently */
void ibc_topo_appendf(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Spread order of @n NICs given their keys and names: writes into @order_p
 * the positions 0..n-1 in the order local ranks take them (NICs with equal
 * keys in natural name order, so the input order never matters). Exposed
 * for unit tests. Return: IBC_OK or IBC_ERR_NO_MEMORY.
 */
ibc_status_t ibc_topo_spread_order(const long (*keys)[IBC_TOPO_KEY_LEVELS],
				   const char *const *names, int n, int *order_p);

#endif /* IBC_TOPO_INTERNAL_H */
