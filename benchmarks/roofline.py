"""The hardware limit: this machine's memory bandwidth and matmul peaks, and what they allow a model.

Measured here, in the same run as the figures they bound (2 torch threads unless --threads):
  - memory bandwidth: copy a large preallocated array (bytes read + written per second, best of N);
  - matmul throughput: 2048x2048 `torch.mm` in bf16 and fp32 (GFLOP/s, best of N). A dtype this
    machine only emulates (bf16 on a CPU without avx512_bf16/AMX: ~1 GFLOP/s, a 2048 matmul would
    take ~20 s a repeat) is measured once on a 512x512 matmul and marked emulated.
  - the compute dtype the project uses here (`proofcheck.precision`): its peak ("matmul_peak_flop_s")
    and its bytes per value bound the roofline and the MFU figures, so every ratio is against
    the dtype that actually ran.
Then, for a decoder shape (SmolLM2-135M by default: 30 layers, hidden 576, MLP 1536, 9 heads /
3 KV heads of 64, vocab 49152, tied embeddings), the decode roofline for a batch of B sequences at
context C: min(bandwidth bound = B x bandwidth / bytes read per decode step (weights once + every
sequence's KV cache), compute bound = matmul peak / FLOPs per generated token). `serve_real.py`
divides its measured decode rate by this; `train_real.py` divides a GRPO step's model FLOPs by
the matmul peak (model-FLOPs utilisation). Run alone it prints the machine and the roofline for
a few batch sizes:

    .venv/bin/python benchmarks/roofline.py [--quick] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any

EMULATED_N = 512   # the bounded bf16 matmul where bf16 is emulated (~0.3 s instead of ~20 s a repeat)


@dataclass(frozen=True)
class Shape:
    """The dimensions of a Llama/Qwen-style decoder that set its FLOPs and bytes."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    @classmethod
    def from_config(cls, cfg: Any) -> Shape:
        """From a transformers config (or anything with the same attribute names)."""
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        return cls(cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads,
                   cfg.num_key_value_heads, head_dim, cfg.vocab_size, bool(cfg.tie_word_embeddings))

    @property
    def layer_matmul_params(self) -> int:
        """Weights one layer multiplies by (q, k, v, o projections and the gated MLP)."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return attn + 3 * self.hidden * self.intermediate

    @property
    def lm_head_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        """All parameters (norms included, the tied head counted once)."""
        norms = self.layers * 2 * self.hidden + self.hidden
        return self.layers * self.layer_matmul_params + norms + self.lm_head_params * (1 if self.tied else 2)

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes one token of context holds (all layers, K and V)."""
        return self.layers * 2 * self.kv_heads * self.head_dim * dtype_bytes

    def attention_flops(self, context: float) -> float:
        """Score and value FLOPs of one new token attending to `context` tokens (all layers)."""
        return 2 * 2 * context * self.heads * self.head_dim * self.layers

    def forward_flops_per_token(self, context: float) -> float:
        """FLOPs of one token's forward pass: matmuls (2 per weight) plus attention."""
        return 2 * (self.layers * self.layer_matmul_params + self.lm_head_params) + self.attention_flops(context)


SMOLLM2_135M = Shape(layers=30, hidden=576, intermediate=1536, heads=9, kv_heads=3, head_dim=64, vocab=49152, tied=True)
QWEN3_8B = Shape(layers=36, hidden=4096, intermediate=12288, heads=32, kv_heads=8, head_dim=128, vocab=151936,
                 tied=False)


def decode_roofline(shape: Shape, batch: int, context: float, bandwidth: float, peak_flops: float,
                    dtype_bytes: int = 2) -> dict[str, float]:
    """Tokens/s the hardware allows when `batch` sequences decode together at mean `context`.

    One decode step reads every matmul weight once (the embedding lookup reads `batch` rows,
    neglected) and each sequence's KV cache, and produces `batch` tokens.
    """
    weight_bytes = (shape.layers * shape.layer_matmul_params + shape.lm_head_params) * dtype_bytes
    step_bytes = weight_bytes + batch * context * shape.kv_bytes_per_token(dtype_bytes)
    bw_bound = batch * bandwidth / step_bytes
    compute_bound = peak_flops / shape.forward_flops_per_token(context)
    return {"bandwidth_bound_tok_s": bw_bound, "compute_bound_tok_s": compute_bound,
            "roofline_tok_s": min(bw_bound, compute_bound), "bytes_per_step": step_bytes,
            "flops_per_token": shape.forward_flops_per_token(context),
            "bound": "bandwidth" if bw_bound < compute_bound else "compute"}


def train_flops_per_token(shape: Shape, context: float, backprop_layers: int | None = None,
                          weight_grads: bool = True) -> float:
    """Model FLOPs of one training token: forward, then backward through the layers that need it.

    Backward costs 2x the forward's matmul FLOPs where weight gradients are taken (full
    fine-tuning: the usual 6 FLOPs per weight in all), 1x where only activation gradients flow
    (frozen base under LoRA: the trainable adapters add little). `backprop_layers`: how many top
    layers the gradient reaches (LoRA on the top N layers stops there); default all.
    """
    n_back = shape.layers if backprop_layers is None else backprop_layers
    fwd = shape.forward_flops_per_token(context)
    per_layer = 2 * shape.layer_matmul_params + shape.attention_flops(context) / shape.layers
    head = 2 * shape.lm_head_params
    bwd_factor = 2 if weight_grads else 1
    # the head's activation gradient is always needed; its weight gradient only when trained fully
    return fwd + bwd_factor * n_back * per_layer + (bwd_factor if weight_grads else 1) * head


def _best_time(fn: Any, repeats: int, device: str) -> float:
    """Fastest of `repeats` timed calls of `fn` (CUDA work synchronised before the clock stops)."""
    import torch

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    fn()  # warm-up: page faults, kernel selection
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_bandwidth(mib: int = 1024, repeats: int = 5, threads: int = 2, device: str = "cpu") -> float:
    """Bytes/s of a copy between two preallocated float32 arrays (read + write counted)."""
    import torch

    torch.set_num_threads(threads)
    n = mib * 2**20 // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    return 2 * n * 4 / _best_time(lambda: dst.copy_(src), repeats, device)


def measure_matmul(dtype: str, n: int = 2048, repeats: int = 5, threads: int = 2, device: str = "cpu") -> float:
    """FLOP/s of an n x n `torch.mm` in `dtype` ("bfloat16" / "float32"), best of `repeats`."""
    import torch

    torch.set_num_threads(threads)
    a = torch.randn(n, n, device=device).to(getattr(torch, dtype))
    b = torch.randn(n, n, device=device).to(getattr(torch, dtype))
    return 2 * n**3 / _best_time(lambda: torch.mm(a, b), repeats, device)


def measure_machine(threads: int = 2, quick: bool = False, device: str = "cpu") -> dict[str, Any]:
    """Bandwidth (bytes/s) and bf16 / fp32 matmul peaks (FLOP/s) of this machine (or GPU), now.

    On a GPU the copy is 4 GiB and the matmul 8192x8192 (a 2048 matmul does not fill an H200)."""
    # best of many: a shared VM's neighbours only ever slow a repeat down, and a peak measured low
    # would flatter every achieved/peak ratio (one 3-repeat bf16 figure came out 459 GFLOP/s
    # minutes after another gave 752). A 2048 matmul is ~25 ms in bf16, ~100 ms in fp32 here.
    from proofcheck.precision import choose_dtype

    reps = 5 if quick else 9
    gpu = device.startswith("cuda")
    mib, n = (4096, 8192) if gpu else (512 if quick else 1024, 2048)
    choice = choose_dtype(device="auto" if gpu else "cpu")
    native_bf16 = choice.machine.native_bf16()
    bf16_n, bf16_reps = (n, 4 * reps) if native_bf16 else (EMULATED_N, 1)
    out = {"bandwidth_B_s": measure_bandwidth(mib, reps, threads, device),
           "matmul_bf16_flop_s": measure_matmul("bfloat16", bf16_n, bf16_reps, threads, device),
           "matmul_fp32_flop_s": measure_matmul("float32", n, 4 * reps, threads, device),
           "bf16_emulated": not native_bf16, "bf16_matmul_n": bf16_n,
           "compute_dtype": choice.dtype, "dtype_reason": choice.reason,
           "threads": threads, "device": device, "matmul_n": n}
    out["matmul_peak_flop_s"] = out["matmul_bf16_flop_s" if choice.bf16 else "matmul_fp32_flop_s"]
    if gpu:  # hand the cached blocks back: a vLLM engine started next sizes itself from the free memory
        import torch

        torch.cuda.empty_cache()
    return out


def best_of(*machines: dict[str, Any]) -> dict[str, Any]:
    """Several `measure_machine` results combined: the highest of each measured rate. Interference
    only ever slows a measurement, so the highest is the closest to what the machine can do."""
    out = dict(machines[0])
    for key in ("bandwidth_B_s", "matmul_bf16_flop_s", "matmul_fp32_flop_s", "matmul_peak_flop_s"):
        out[key] = max(m[key] for m in machines)
    return out


def value_bytes(m: dict[str, Any]) -> int:
    """Bytes per weight / KV value in the compute dtype the machine measurement chose."""
    return 2 if m["compute_dtype"] == "bfloat16" else 4


def current_device() -> str:
    """"cuda" when torch sees a GPU, else "cpu" (what the serving and training benchmarks run on)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def machine_rows(m: dict[str, float]) -> list[str]:
    """Markdown rows for the measured machine."""
    n, where = m["matmul_n"], "GPU" if m["device"].startswith("cuda") else f"{m['threads']} threads"
    bn = m["bf16_matmul_n"]
    emulated = " (emulated: no native bf16 here; one repeat)" if m["bf16_emulated"] else ""
    used = {d: " (the compute dtype here)" if m["compute_dtype"] == d else "" for d in ("bfloat16", "float32")}
    return [f"| memory bandwidth (copy, read+write, {where}) | {m['bandwidth_B_s'] / 1e9:.1f} GB/s |",
            f"| bf16 matmul {bn}x{bn}{emulated}{used['bfloat16']} | {m['matmul_bf16_flop_s'] / 1e9:.1f} GFLOP/s |",
            f"| fp32 matmul {n}x{n}{used['float32']} | {m['matmul_fp32_flop_s'] / 1e9:.0f} GFLOP/s |"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repeats, smaller copy")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (the serving/training benchmarks use 2)")
    ap.add_argument("--context", type=float, default=400.0, help="mean context (tokens) for the decode roofline")
    args = ap.parse_args()
    from _figures import emit

    m = measure_machine(args.threads, args.quick)
    s = SMOLLM2_135M
    short = {"bfloat16": "bf16", "float32": "fp32"}[m["compute_dtype"]]
    print(f"\n### The machine, measured now; decode roofline of SmolLM2-135M ({s.params / 1e6:.1f} M params, "
          f"{short} weights and KV cache: {m['dtype_reason']}) at context {args.context:.0f}\n")
    print("| measurement | value |\n|---|---:|")
    print("\n".join(machine_rows(m)))
    print("\n| sequences decoding together | bandwidth bound tok/s | compute bound tok/s | roofline tok/s | bound |")
    print("|---:|---:|---:|---:|---|")
    for batch in (1, 8, 32, 128):
        r = decode_roofline(s, batch, args.context, m["bandwidth_B_s"], m["matmul_peak_flop_s"], value_bytes(m))
        print(f"| {batch} | {r['bandwidth_bound_tok_s']:.0f} | {r['compute_bound_tok_s']:.0f} "
              f"| {r['roofline_tok_s']:.0f} | {r['bound']} |")
    emit({"machine.bandwidth_GB_s": round(m["bandwidth_B_s"] / 1e9, 2),
          "machine.matmul_bf16_GFLOP_s": round(m["matmul_bf16_flop_s"] / 1e9, 1),
          "machine.matmul_fp32_GFLOP_s": round(m["matmul_fp32_flop_s"] / 1e9, 1),
          "machine.bf16_emulated": m["bf16_emulated"], "machine.compute_dtype": m["compute_dtype"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
