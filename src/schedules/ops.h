/* Reduction kernels and the operator table.
 *
 * Every collective that combines data goes through crnet__reduce(); nothing
 * else knows how a datatype is laid out. Kernels are written so the compiler
 * vectorises them (restrict pointers, simple loops, -O3 on this file), because
 * for large messages the reduction runs at memory speed next to the network.
 *
 * float16 and bfloat16 are reduced by widening to float, combining, and
 * rounding back to nearest-even, element by element, so the result of one
 * combine does not depend on the vector length or on alignment.
 */
#ifndef CRNET_OPS_H
#define CRNET_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crnet.h"

/* True if `op` may be applied to `dt`: a built-in op on a reducible type
 * (bitwise ops on integer types only; nothing on CRNET_BYTE), or a live user
 * op on any type, CRNET_BYTE included (users may combine opaque bytes). */
bool crnet__op_valid(crnet_op op, crnet_datatype dt);

/* True if `op` names an operator: a built-in one, or a live user op. */
bool crnet__op_exists(crnet_op op);

/* True for built-in ops and for user ops created commutative. */
bool crnet__op_commutative(crnet_op op);

/* inout[i] = in[i] (+) inout[i] for i < count. `in` is the operand of the
 * lower-ranked contributions. in and inout must not overlap. The caller has
 * checked crnet__op_valid(op, dt). Never fails. */
void crnet__reduce(crnet_op op, crnet_datatype dt, const void *in,
                   void *inout, size_t count);

/* Which 16-bit float kernels the reductions run, as chosen at the first
 * use: "f16c" or "portable" for float16 and "avx2" or "portable" for
 * bfloat16 (CRNET_NO_F16C in the environment keeps both portable). For the
 * tests of both paths, which must know which one they ran. */
const char *crnet__f16_kernel(void);
const char *crnet__bf16_kernel(void);

/* Conversions used by the kernels and by tests (round to nearest even, NaN
 * stays NaN, overflow goes to infinity). */
float crnet__half_to_float(uint16_t h);
uint16_t crnet__float_to_half(float f);
float crnet__bfloat16_to_float(uint16_t b);
uint16_t crnet__float_to_bfloat16(float f);

#endif
