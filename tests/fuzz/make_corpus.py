#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of tests/fuzz/fuzz_operators.cc into tests/fuzz/corpus/: for each of
the 30 operators (the input's first byte), one input of zeros past it (contiguous F32, default
attributes), one of small bytes (small shapes, valid data) and one of random bytes (anything),
deterministic. libFuzzer grows it from there; re-run after changing the decoder."""
import os
import random

OPERATORS = ["gelu", "gelu_backward", "gelu_backward_v2", "gelu_mul", "gelu_mul_backward",
             "swiglu", "swiglu_backward", "clipped_swiglu", "clipped_swiglu_backward",
             "moe_finalize_routing_v2", "moe_finalize_routing_v2_grad", "moe_init_routing_v2",
             "moe_init_routing_v2_grad", "moe_gating_top_k_softmax",
             "moe_gating_top_k_softmax_grad", "moe_gating_top_k", "moe_gating_top_k_grad",
             "moe_expert_counts", "moe_bias_update", "moe_gating_weights",
             "moe_aux_loss", "moe_aux_loss_grad", "moe_z_loss", "moe_z_loss_grad",
             "moe_expert_capacity", "swiglu_quant", "gelu_mul_quant", "clipped_swiglu_quant",
             "dequant_swiglu_quant", "moe_init_routing_quant_v2"]

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus")
os.makedirs(out, exist_ok=True)
rng = random.Random(16)
for op, name in enumerate(OPERATORS):
    seeds = {
        "zeros": bytes([op]) + bytes(48),
        "small": bytes([op] + [rng.randrange(0, 100) for _ in range(80)]),
        "random": bytes([op] + [rng.randrange(0, 256) for _ in range(120)]),
    }
    for kind, data in seeds.items():
        with open(os.path.join(out, f"{op:02d}-{name}-{kind}"), "wb") as f:
            f.write(data)
