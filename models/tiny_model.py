"""Build a tiny Qwen2-architecture model locally (no model hub needed).

A byte-level BPE tokenizer is trained on the shipped samples, synthetic tasks and our prompt
texts; ChatML special tokens, the protocol's tags (as single tokens) and a chat template are
added. The model has random weights and head_dim 32 (vLLM-CPU's minimum). transformers, TRL
and vLLM all load the folder.

Example:
    >>> build_tiny_model("runs/tiny")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAG_TOKENS = [f"<{c}{t}>" for t in ("assessment", "errors", "first_error_step", "think", "level", "step")
              for c in ("", "/")]


def _corpus(n_synth: int, seed: int) -> list[str]:
    from proofcheck.data.loaders import SAMPLES_DIR
    from proofcheck.data.synth import make_tasks
    from proofcheck.protocol import PROMPT_STYLES, style_texts, verifier_user_prompt

    texts = [text for style in PROMPT_STYLES for text in style_texts(style)]  # every style's fixed text
    for path in sorted(SAMPLES_DIR.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                texts += [str(v) for v in rec.values() if isinstance(v, str)]
                texts += [s for s in rec.get("steps") or [] if isinstance(s, str)]
    for t in make_tasks(n_synth, seed=seed):
        texts += [verifier_user_prompt(t["problem"], t["steps"]), t["gold_verification"]]
    texts += [verifier_user_prompt(t["problem"], t["steps"], style="compact") for t in make_tasks(8, seed=seed)]
    return texts


def build_tiny_model(out_dir: str | Path, *, vocab_size: int = 1024, hidden_size: int = 128,
                     num_layers: int = 2, seed: int = 0, n_synth: int = 300) -> Path:
    """Write tokenizer + randomly initialised Qwen2 model to `out_dir`; return the path.

    Deterministic for a given seed. Skips the work when `out_dir` already holds a model
    built with the same settings (a `tiny_model.json` stamp records them).
    """
    out = Path(out_dir)
    settings = {"vocab_size": vocab_size, "hidden_size": hidden_size, "num_layers": num_layers,
                "seed": seed, "n_synth": n_synth, "format": 2}  # 2: compact prompt texts in the corpus
    stamp = out / "tiny_model.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == settings:
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(n_synth, seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None, model_max_length=8192)
    fast.add_tokens(TAG_TOKENS)
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=hidden_size // 32, num_key_value_heads=max(1, hidden_size // 64),
        max_position_embeddings=8192, tie_word_embeddings=True, rope_theta=10000.0,
        bos_token_id=fast.convert_tokens_to_ids("<|im_start|>"), eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = fast.eos_token_id
    model.generation_config.pad_token_id = fast.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    stamp.write_text(json.dumps(settings))
    return out
