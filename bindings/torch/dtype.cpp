/* SPDX-License-Identifier: MIT */
/*
 * dtype.cpp - how torch tensors and reduce ops map onto ibcoll's element
 * types and reductions, the checks every tensor passes, and the error texts.
 *
 * Element types: torch's float32/float64/float16/bfloat16/int8/uint8/int32/
 * int64 are ibcoll's; complex64/complex128 are pairs of float32/float64
 * (SUM and AVG act on each part; MIN, MAX and PRODUCT are refused, as
 * torch.distributed refuses them for every backend); bool is a byte of 0 or
 * 1 reduced as ProcessGroupNCCL does (SUM and MAX: logical or; PRODUCT and
 * MIN: logical and; AVG refused); Gloo 1.13 has no bool at all ("Invalid
 * scalar type"). Data movement (broadcast, gathers, all-to-all, send/recv)
 * takes any dtype; one ibcoll has no type for (int16) moves as bytes.
 */
#include <stdexcept>
#include <string>

#include "pg_ibcoll.hpp"

namespace ibcoll_torch {

static std::string dtype_name(at::ScalarType t)
{
	switch (t) {
	case at::kFloat: return "torch.float32";
	case at::kDouble: return "torch.float64";
	case at::kHalf: return "torch.float16";
	case at::kBFloat16: return "torch.bfloat16";
	case at::kChar: return "torch.int8";
	case at::kByte: return "torch.uint8";
	case at::kShort: return "torch.int16";
	case at::kInt: return "torch.int32";
	case at::kLong: return "torch.int64";
	case at::kBool: return "torch.bool";
	case at::kComplexFloat: return "torch.complex64";
	case at::kComplexDouble: return "torch.complex128";
	default: return std::string("torch.") + c10::toString(t);
	}
}

static const char *redop_name(const ::c10d::ReduceOp &rop)
{
	switch (rop.op_) {
	case ::c10d::ReduceOp::SUM: return "SUM";
	case ::c10d::ReduceOp::AVG: return "AVG";
	case ::c10d::ReduceOp::PRODUCT: return "PRODUCT";
	case ::c10d::ReduceOp::MIN: return "MIN";
	case ::c10d::ReduceOp::MAX: return "MAX";
	case ::c10d::ReduceOp::BAND: return "BAND";
	case ::c10d::ReduceOp::BOR: return "BOR";
	case ::c10d::ReduceOp::BXOR: return "BXOR";
	case ::c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
	default: return "an unknown op";
	}
}

/* ibcoll's element type for @t, and how many of them one torch element is */
static bool ibc_type_of(at::ScalarType t, ibc_dtype_t *dtype_p, size_t *per_elem_p)
{
	*per_elem_p = 1;
	switch (t) {
	case at::kFloat: *dtype_p = IBC_FLOAT32; return true;
	case at::kDouble: *dtype_p = IBC_FLOAT64; return true;
	case at::kHalf: *dtype_p = IBC_FLOAT16; return true;
	case at::kBFloat16: *dtype_p = IBC_BFLOAT16; return true;
	case at::kChar: *dtype_p = IBC_INT8; return true;
	case at::kByte: *dtype_p = IBC_UINT8; return true;
	case at::kBool: *dtype_p = IBC_UINT8; return true;
	case at::kInt: *dtype_p = IBC_INT32; return true;
	case at::kLong: *dtype_p = IBC_INT64; return true;
	case at::kComplexFloat: *dtype_p = IBC_FLOAT32; *per_elem_p = 2; return true;
	case at::kComplexDouble: *dtype_p = IBC_FLOAT64; *per_elem_p = 2; return true;
	default: return false;
	}
}

Elems move_elems(const at::Tensor &t)
{
	Elems e;
	size_t per;

	if (ibc_type_of(t.scalar_type(), &e.dtype, &per)) {
		e.count = (size_t)t.numel() * per;
	} else {
		e.dtype = IBC_UINT8;
		e.count = (size_t)t.numel() * t.element_size();
	}
	return e;
}

Reduction reduce_elems(const char *opname, const at::Tensor &t, const ::c10d::ReduceOp &rop)
{
	at::ScalarType st = t.scalar_type();
	Reduction r;
	size_t per;

	switch (rop.op_) {
	case ::c10d::ReduceOp::SUM: r.op = IBC_SUM; break;
	case ::c10d::ReduceOp::AVG: r.op = IBC_AVG; break;
	case ::c10d::ReduceOp::PRODUCT: r.op = IBC_PROD; break;
	case ::c10d::ReduceOp::MIN: r.op = IBC_MIN; break;
	case ::c10d::ReduceOp::MAX: r.op = IBC_MAX; break;
	default:
		throw std::runtime_error(std::string("ibcoll: ") + opname + ": reduce op " +
					 redop_name(rop) + " is not supported by ibcoll");
	}
	if (!ibc_type_of(st, &r.dtype, &per))
		throw std::runtime_error(std::string("ibcoll: ") + opname + ": " + dtype_name(st) +
					 " cannot be reduced by ibcoll (no such element type)");
	if (per == 2 && r.op != IBC_SUM && r.op != IBC_AVG)
		throw std::runtime_error(std::string("ibcoll: ") + opname + ": " + redop_name(rop) +
					 " is not defined on complex tensors (" + dtype_name(st) +
					 "); only SUM and AVG are");
	if (st == at::kBool) {
		if (r.op == IBC_AVG)
			throw std::runtime_error(std::string("ibcoll: ") + opname +
						 ": AVG is not defined on torch.bool");
		/* values are 0 or 1: or = max, and = min (ProcessGroupNCCL: SUM -> max) */
		if (r.op == IBC_SUM)
			r.op = IBC_MAX;
		else if (r.op == IBC_PROD)
			r.op = IBC_MIN;
	}
	r.count = (size_t)t.numel() * per;
	return r;
}

void check_tensor(const char *opname, const std::string &name, const at::Tensor &t,
		  TensorLayout layout)
{
	std::string where = std::string("ibcoll: ") + opname + ": " + name;

	if (!t.defined())
		throw std::runtime_error(where + " is an undefined tensor");
	if (t.layout() != at::kStrided)
		throw std::runtime_error(where + " is a sparse tensor; ibcoll takes dense tensors "
					 "only (call .to_dense())");
	if (!t.device().is_cpu())
		throw std::runtime_error(where + " is on " + t.device().str() +
					 "; the ibcoll torch backend takes CPU tensors only");
	/*
	 * Element-wise operations only need the same dense layout on every rank
	 * (channels-last, a transpose: numel elements from data_ptr, in some
	 * order); the others cut the buffer into blocks.
	 */
	if (layout == LAYOUT_ANY_STRIDES)
		return;
	if (layout == LAYOUT_DENSE ? !t.is_non_overlapping_and_dense() : !t.is_contiguous())
		throw std::runtime_error(where + " is not contiguous (sizes " +
					 c10::str(t.sizes()) + ", strides " +
					 c10::str(t.strides()) + "); pass tensor.contiguous()");
}

void throw_status(const char *opname, int rank, ibc_status_t st)
{
	const char *text = ibc_last_error();
	std::string msg = std::string("ibcoll: ") + opname + " failed: ";

	if (text && *text)
		msg += text;
	else
		msg += "rank " + std::to_string(rank) + ": " + ibc_status_str(st);
	msg += std::string(" (") + ibc_status_str(st) + ")";
	throw std::runtime_error(msg);
}

void throw_unsupported(const char *opname, const char *needs)
{
	throw std::runtime_error(std::string("ibcoll: ") + opname + " not supported yet (needs " +
				 needs + ")");
}

} // namespace ibcoll_torch
