// SPDX-License-Identifier: Apache-2.0
// The elementwise framework's kernels, appended after `common` (storage.cl, math.cl, rounded.cl) and one functor source, which
// defines NUM_OUTPUTS, NUM_INPUTS and
//   inline void apply(float *out, const float *in, uint16 attribute_words);
// One work-item computes one element of the plan (src/elementwise/plan.h) in its iteration
// order: element begin + global id, each id launched exactly once (opencl/program.h launch), so
// there is no bounds check. The host side is devices/opencl/elementwise.cc.
//
// Every kernel takes the same arguments. What changes from call to call comes as scalars and
// vectors, values the compiler knows no store can change (PoCL does not vectorize across
// work-items what it must reload from a struct argument's memory):
//   p0..p7           the operand buffers, outputs first; only NUM_OPERANDS are used
//   index            each operand's base as an element index in its buffer
//   begin            the plan element of global id 0 (the rows kernels: the row of global id
//                    (0, 0))
//   attribute_words  the bytes of the operator's attribute struct (at most 64), for as_float
//   step, row_step   each operand's inner and outer strides (the row and rows kernels)
//   plan, ndim       shape[ndim], then strides[operand][ndim] in elements: made once per
//                    descriptor, read by the strided kernels only

#define NUM_OPERANDS (NUM_OUTPUTS + NUM_INPUTS)
#if NUM_OUTPUTS > 2 || NUM_INPUTS > 6
#error "APPLY_AT handles up to 2 outputs and 6 inputs"
#endif

#define KERNEL_PARAMS                                                                              \
  __global storage_t *p0, __global storage_t *p1, __global storage_t *p2, __global storage_t *p3,  \
      __global storage_t *p4, __global storage_t *p5, __global storage_t *p6,                      \
      __global storage_t *p7, const ulong8 index, const ulong begin, const uint16 attribute_words, \
      const long8 step, const long8 row_step, __constant const long *plan, const uint ndim

// Operand k's buffer, and lane k of a vector argument: k is a constant at every use, so the
// switch folds to one argument (a private array would live in memory, which PoCL cannot prove
// the stores leave alone, and would not vectorize across work-items).
INLINE __global storage_t *operand_buffer(int k, __global storage_t *p0, __global storage_t *p1,
                                          __global storage_t *p2, __global storage_t *p3,
                                          __global storage_t *p4, __global storage_t *p5,
                                          __global storage_t *p6, __global storage_t *p7) {
  switch (k) {
    case 0:
      return p0;
    case 1:
      return p1;
    case 2:
      return p2;
    case 3:
      return p3;
    case 4:
      return p4;
    case 5:
      return p5;
    case 6:
      return p6;
    default:
      return p7;
  }
}
INLINE long lane(int k, long8 v) {
  switch (k) {
    case 0:
      return v.s0;
    case 1:
      return v.s1;
    case 2:
      return v.s2;
    case 3:
      return v.s3;
    case 4:
      return v.s4;
    case 5:
      return v.s5;
    case 6:
      return v.s6;
    default:
      return v.s7;
  }
}
// Operand k's inner step. With -DCONSTANT_STEPS the host bakes them in (-DSTEP_<k>, all 1 or 2:
// interleaved pairs), and the compiler loads pairs with shuffles where a run-time stride leaves
// only a scalar loop.
INLINE long operand_step(int k, long8 step) {
#ifdef CONSTANT_STEPS
  const long8 baked = (long8)(STEP_0, STEP_1, STEP_2, STEP_3, STEP_4, STEP_5, STEP_6, STEP_7);
  return lane(k, baked);
#else
  return lane(k, step);
#endif
}
#define OPERAND(k) operand_buffer((k), p0, p1, p2, p3, p4, p5, p6, p7)
#define BASE(k) ((ulong)lane((k), as_long8(index)))

// Loads the inputs at at(k), applies the functor and stores the outputs at at(k). Written out
// per operand under constant conditions, with no loop: PoCL splits a kernel at loops into
// regions, keeping what crosses them in per-work-item memory, and then vectorizes nothing.
#define LOAD_INPUT(k, at)          \
  if ((k) < NUM_INPUTS)            \
  in[(k) < NUM_INPUTS ? (k) : 0] = \
      load_value(OPERAND(SOURCE(NUM_OUTPUTS + (k))), PAIRED_AT(at, NUM_OUTPUTS + (k)))
// Paired stores only for F32: PoCL turns an interleaved group of 16-bit stores into something
// several times slower than two strided ones (ClippedSwigluBackward BF16: 101 ms against 17).
#ifdef STORAGE_F32
#define STORE_OUTPUT(k, at, value) \
  if ((k) < NUM_OUTPUTS) store_value(OPERAND(SOURCE(k)), PAIRED_AT(at, k), value)
#else
#define STORE_OUTPUT(k, at, value) \
  if ((k) < NUM_OUTPUTS) store_value(OPERAND(k), at(k), value)
#endif

// Interleaved pairs (-DPAIRED_<k>=1: operand k is the odd element after operand k - 1, with the
// same buffer and steps of 2): addressed as k - 1's pointer plus one, so that the compiler sees
// one pointer with offsets 2i and 2i + 1 and loads or stores the pair as one interleaved group.
INLINE int paired(int k) {
#ifdef CONSTANT_STEPS
  return (int)lane(
      k, (long8)(PAIRED_0, PAIRED_1, PAIRED_2, PAIRED_3, PAIRED_4, PAIRED_5, PAIRED_6, PAIRED_7));
#else
  (void)k;
  return 0;
#endif
}
#define SOURCE(k) ((k)-paired(k))
#define PAIRED_AT(at, k) (at(SOURCE(k)) + (ulong)paired(k))

#define APPLY_AT(at)                                   \
  do {                                                 \
    float in[NUM_INPUTS];                              \
    float out[NUM_OUTPUTS];                            \
    LOAD_INPUT(0, at);                                 \
    LOAD_INPUT(1, at);                                 \
    LOAD_INPUT(2, at);                                 \
    LOAD_INPUT(3, at);                                 \
    LOAD_INPUT(4, at);                                 \
    LOAD_INPUT(5, at);                                 \
    apply(out, in, attribute_words);                   \
    ROUND_OUTPUT_ONCE();                               \
    STORE_OUTPUT(0, at, out[0]);                       \
    STORE_OUTPUT(1, at, out[NUM_OUTPUTS > 1 ? 1 : 0]); \
  } while (0)

// A functor with an oracle (rounded.cl, ROUND_ONCE) corrects its output where F16/BF16 could round
// it differently from the exact value. PoCL on a CPU runs this 2-6x slower than without the
// branch (its vectorizer does not keep the rare double code behind it, inlined or as a call;
// docs/accuracy.md); a GPU runs it only in the warps that have such a lane.
#if defined(ROUND_ONCE) && defined(HAS_ORACLE)
#define ROUND_OUTPUT_ONCE()                                \
  if (near_rounding_boundary(out[0], rounding_window(in))) \
  out[0] = rounded_oracle(in[0], in[NUM_INPUTS > 1 ? 1 : 0], attribute_words)
#else
#define ROUND_OUTPUT_ONCE() (void)0
#endif

// Stores 0 to the outputs at at(k): the rows a call skips (ClippedSwiglu's group_index).
#define ZERO_AT(at)            \
  do {                         \
    STORE_OUTPUT(0, at, 0.0f); \
    STORE_OUTPUT(1, at, 0.0f); \
  } while (0)

// Every operand walks the plan with stride 1 in one dim: no index arithmetic.
#define CONTIGUOUS_AT(k) (BASE(k) + begin + get_global_id(0))

// One plan dim with any strides (interleaved halves, a transposed or strided row): one multiply.
#define ROW_AT(k) \
  ((ulong)((long)BASE(k) + (long)(begin + get_global_id(0)) * operand_step((k), step)))

// Two dims, run by whole rows of the inner dim (the common case: a split operand's halves, a
// batch of strided rows): global id (j, row - begin), element j of a row at `step` apart, rows
// at `row_step` apart. No division, and nothing that is not a plain expression (a loop inside
// would be the innermost, all PoCL's vectorizer looks at), so PoCL vectorizes along the row.
#define ROWS_AT(k)                                                                  \
  ((ulong)((long)BASE(k) + (long)(begin + get_global_id(1)) * lane((k), row_step) + \
           (long)get_global_id(0) * operand_step((k), step)))

// Any strides (negative, broadcast inputs, interleaved halves): the element's coordinates, then
// each operand's offset.
#define STRIDED_OFFSETS                                             \
  long offset[NUM_OPERANDS];                                        \
  for (int k = 0; k < NUM_OPERANDS; ++k) offset[k] = (long)BASE(k); \
  ulong rest = begin + get_global_id(0);                            \
  for (int d = (int)ndim - 1; d >= 0; --d) {                        \
    const ulong size = (ulong)plan[d];                              \
    const long coordinate = (long)(rest % size);                    \
    rest /= size;                                                   \
    for (int k = 0; k < NUM_OPERANDS; ++k)                          \
      offset[k] += coordinate * plan[(int)ndim * (k + 1) + d];      \
  }
#define STRIDED_AT(k) ((ulong)offset[k])

__kernel void elementwise_contiguous(KERNEL_PARAMS) {
  APPLY_AT(CONTIGUOUS_AT);
}

__kernel void zero_contiguous(KERNEL_PARAMS) {
  ZERO_AT(CONTIGUOUS_AT);
}

__kernel void elementwise_row(KERNEL_PARAMS) {
  APPLY_AT(ROW_AT);
}

__kernel void zero_row(KERNEL_PARAMS) {
  ZERO_AT(ROW_AT);
}

__kernel void elementwise_rows(KERNEL_PARAMS) {
  APPLY_AT(ROWS_AT);
}

__kernel void zero_rows(KERNEL_PARAMS) {
  ZERO_AT(ROWS_AT);
}

__kernel void elementwise_strided(KERNEL_PARAMS) {
  STRIDED_OFFSETS
  APPLY_AT(STRIDED_AT);
}

__kernel void zero_strided(KERNEL_PARAMS) {
  STRIDED_OFFSETS
  ZERO_AT(STRIDED_AT);
}
