/* SPDX-License-Identifier: MIT */
/*
 * wire.h - the one codec for integers on every ibcoll wire (bootstrap
 * frames, message descriptors, verbs connection info and control
 * messages): little-endian, byte by byte, so it is right on any host and
 * needs no alignment.
 */
#ifndef IBC_WIRE_H
#define IBC_WIRE_H

#include <stdint.h>

static inline void ibc_wire_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void ibc_wire_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void ibc_wire_put64(uint8_t *p, uint64_t v)
{
	ibc_wire_put32(p, (uint32_t)v);
	ibc_wire_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t ibc_wire_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t ibc_wire_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
	       ((uint32_t)p[3] << 24);
}

static inline uint64_t ibc_wire_get64(const uint8_t *p)
{
	return (uint64_t)ibc_wire_get32(p) | ((uint64_t)ibc_wire_get32(p + 4) << 32);
}

#endif /* IBC_WIRE_H */
