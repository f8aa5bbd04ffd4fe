// The elementwise framework's kernels, appended after common.cl and one functor source, which
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
//   begin            the plan element of global id 0
//   attribute_words  the bytes of the operator's attribute struct (at most 64), for as_float
//   step             each operand's stride in a one-dim plan (the row kernels)
//   plan, ndim       shape[ndim], then strides[operand][ndim] in elements: made once per
//                    descriptor, read by the strided kernels only

#define NUM_OPERANDS (NUM_OUTPUTS + NUM_INPUTS)

#define KERNEL_PARAMS                                                                      \
  __global storage_t *p0, __global storage_t *p1, __global storage_t *p2,                 \
      __global storage_t *p3, __global storage_t *p4, __global storage_t *p5,             \
      __global storage_t *p6, __global storage_t *p7, const ulong8 index, const ulong begin, \
      const uint16 attribute_words, const long8 step, __constant const long *plan,         \
      const uint ndim

// Operand k's buffer and base index: k is a constant once the operand loops are unrolled, and
// a switch then folds to one argument (a private array would live in memory, which PoCL cannot
// prove the stores leave alone, and would not vectorize across work-items).
inline __global storage_t *operand_buffer(int k, __global storage_t *p0, __global storage_t *p1,
                                          __global storage_t *p2, __global storage_t *p3,
                                          __global storage_t *p4, __global storage_t *p5,
                                          __global storage_t *p6, __global storage_t *p7) {
  switch (k) {
    case 0: return p0;
    case 1: return p1;
    case 2: return p2;
    case 3: return p3;
    case 4: return p4;
    case 5: return p5;
    case 6: return p6;
    default: return p7;
  }
}
inline long operand_step(int k, long8 step) {
  switch (k) {
    case 0: return step.s0;
    case 1: return step.s1;
    case 2: return step.s2;
    case 3: return step.s3;
    case 4: return step.s4;
    case 5: return step.s5;
    case 6: return step.s6;
    default: return step.s7;
  }
}
inline ulong operand_base(int k, ulong8 index) {
  switch (k) {
    case 0: return index.s0;
    case 1: return index.s1;
    case 2: return index.s2;
    case 3: return index.s3;
    case 4: return index.s4;
    case 5: return index.s5;
    case 6: return index.s6;
    default: return index.s7;
  }
}
#define OPERAND(k) operand_buffer((k), p0, p1, p2, p3, p4, p5, p6, p7)
#define BASE(k) operand_base((k), index)

// Loads the inputs at at(k), applies the functor and stores the outputs at at(k).
#define APPLY_AT(at)                                                                 \
  do {                                                                               \
    float in[NUM_INPUTS];                                                            \
    float out[NUM_OUTPUTS];                                                          \
    for (int k = 0; k < NUM_INPUTS; ++k)                                             \
      in[k] = load_value(OPERAND(NUM_OUTPUTS + k), at(NUM_OUTPUTS + k));                \
    apply(out, in, attribute_words);                                                 \
    for (int k = 0; k < NUM_OUTPUTS; ++k) store_value(OPERAND(k), at(k), out[k]);   \
  } while (0)

// Stores 0 to the outputs at at(k): the rows a call skips (ClippedSwiglu's group_index).
#define ZERO_AT(at)                                                                 \
  do {                                                                              \
    for (int k = 0; k < NUM_OUTPUTS; ++k) store_value(OPERAND(k), at(k), 0.0f);    \
  } while (0)

// Every operand walks the plan with stride 1 in one dim: no index arithmetic.
#define CONTIGUOUS_AT(k) (BASE(k) + begin + get_global_id(0))

// One plan dim with any strides (interleaved halves, a transposed or strided row): one multiply.
#define ROW_AT(k) \
  ((ulong)((long)BASE(k) + (long)(begin + get_global_id(0)) * operand_step((k), step)))

// Any strides (negative, broadcast inputs, interleaved halves): the element's coordinates, then
// each operand's offset.
#define STRIDED_OFFSETS                                                              \
  long offset[NUM_OPERANDS];                                                         \
  for (int k = 0; k < NUM_OPERANDS; ++k) offset[k] = (long)BASE(k);                  \
  ulong rest = begin + get_global_id(0);                                             \
  for (int d = (int)ndim - 1; d >= 0; --d) {                                         \
    const ulong size = (ulong)plan[d];                                               \
    const long coordinate = (long)(rest % size);                                     \
    rest /= size;                                                                    \
    for (int k = 0; k < NUM_OPERANDS; ++k)                                           \
      offset[k] += coordinate * plan[(int)ndim * (k + 1) + d];                       \
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

__kernel void elementwise_strided(KERNEL_PARAMS) {
  STRIDED_OFFSETS
  APPLY_AT(STRIDED_AT);
}

__kernel void zero_strided(KERNEL_PARAMS) {
  STRIDED_OFFSETS
  ZERO_AT(STRIDED_AT);
}
