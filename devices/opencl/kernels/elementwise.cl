// The elementwise framework's kernels, appended after common.cl and one functor source, which
// defines NUM_OUTPUTS, NUM_INPUTS and
//   inline void apply(float *out, const float *in, const attributes_t *attributes);
// One work-item computes one element of the plan (src/elementwise/plan.h) in its iteration
// order: element begin + global id. The host mirrors call_t and attributes_t exactly
// (devices/opencl/elementwise.cc). Only NUM_OPERANDS of the eight operand pointers are used.

#define MAX_OPERANDS 8
#define NUM_OPERANDS (NUM_OUTPUTS + NUM_INPUTS)

// What changes from call to call; the plan's shape and strides are in a buffer made once per
// descriptor: shape[ndim], then strides[operand][ndim] (elements).
typedef struct {
  ulong index[MAX_OPERANDS];  // element index of each operand's base in its buffer
  ulong begin, count;         // the elements [begin, begin + count) of the plan
  uint ndim;
  uint zero_fill;             // store 0 to the outputs instead of computing
} call_t;

// Loads the inputs at `at`, applies the functor (or zero-fills) and stores the outputs.
#define ELEMENTWISE_BODY(at)                                                      \
  __global storage_t *operands[MAX_OPERANDS] = {p0, p1, p2, p3, p4, p5, p6, p7}; \
  float in[NUM_INPUTS + 1];                                                       \
  float out[NUM_OUTPUTS];                                                         \
  if (call.zero_fill) {                                                         \
    for (int k = 0; k < NUM_OUTPUTS; ++k) out[k] = 0.0f;                          \
  } else {                                                                        \
    for (int k = 0; k < NUM_INPUTS; ++k)                                          \
      in[k] = load_value(operands[NUM_OUTPUTS + k], at(NUM_OUTPUTS + k));         \
    apply(out, in, &attributes);                                                  \
  }                                                                               \
  for (int k = 0; k < NUM_OUTPUTS; ++k) store_value(operands[k], at(k), out[k]);

#define OPERAND_PARAMS                                                                    \
  __global storage_t *p0, __global storage_t *p1, __global storage_t *p2,                \
      __global storage_t *p3, __global storage_t *p4, __global storage_t *p5,            \
      __global storage_t *p6, __global storage_t *p7

// Every operand walks the plan with stride 1 in one dim: no index arithmetic.
__kernel void elementwise_contiguous(OPERAND_PARAMS, const call_t call,
                                     const attributes_t attributes,
                                     __constant const long *unused_plan) {
  const ulong i = get_global_id(0);
  if (i >= call.count) return;
  const ulong element = call.begin + i;
#define CONTIGUOUS_AT(k) (call.index[k] + element)
  ELEMENTWISE_BODY(CONTIGUOUS_AT)
#undef CONTIGUOUS_AT
}

// Any strides (negative, broadcast inputs, interleaved halves): the element's coordinates, then
// each operand's offset.
__kernel void elementwise_strided(OPERAND_PARAMS, const call_t call,
                                  const attributes_t attributes, __constant const long *plan) {
  const ulong i = get_global_id(0);
  if (i >= call.count) return;
  const int ndim = (int)call.ndim;
  long offset[NUM_OPERANDS];
  for (int k = 0; k < NUM_OPERANDS; ++k) offset[k] = (long)call.index[k];
  ulong rest = call.begin + i;
  for (int d = ndim - 1; d >= 0; --d) {
    const ulong size = (ulong)plan[d];
    const long coordinate = (long)(rest % size);
    rest /= size;
    for (int k = 0; k < NUM_OPERANDS; ++k) offset[k] += coordinate * plan[ndim * (k + 1) + d];
  }
#define STRIDED_AT(k) ((ulong)offset[k])
  ELEMENTWISE_BODY(STRIDED_AT)
#undef STRIDED_AT
}
