"""The held-out evaluation's generation and grading, on the three backends training may use.

A verifier prompt is the row's conversational `prompt` through the tokenizer's chat template (as
TRL does, with the trainer's `chat_template_kwargs`: `template_kwargs`). k passes per row come from
a vLLM `LLM` (`generate_vllm`: one seeded `n=k` request per row, optionally constrained to the
answer format) or from sampled `model.generate` (`generate_hf`: `num_return_sequences=k` in a forked
RNG, so evaluating never changes the training run); `trl vllm-serve` is driven by the evaluation
callback itself (`proofcheck.train.callbacks.VerifierEvalCallback._server`). Every pass is parsed
with the core protocol (`proofcheck.verification.parse_pass`) and graded with the reward package's
structural grader (`grade_row`). `eval_backend` says which generation a trainer's evaluation uses.
"""

from __future__ import annotations

from typing import Any

from proofcheck.parsing import finish_reason_from_ids


def _finish_and_text(tokenizer: Any, ids: list[int], eos_ids: set[int]) -> tuple[str, str]:
    """(text, finish_reason) of one generated sequence from HF `generate`.

    `generate` fills a finished sequence with padding after its EOS, so the sequence is cut just
    after its first EOS; the finish reason is then the core rule, `finish_reason_from_ids` (no
    token limit given: a sequence without EOS ran out of `max_new_tokens`, "length"). The text is
    the decoded tokens before the EOS.
    """
    end = next((i + 1 for i, t in enumerate(ids) if t in eos_ids), len(ids))
    finish = finish_reason_from_ids(ids[:end], eos_ids, None)
    answer = ids[:end - 1] if finish == "stop" else ids[:end]
    return tokenizer.decode(answer, skip_special_tokens=True), finish


def grade_row(row: dict, passes: list[tuple[str, str]]) -> dict:
    """One row's (text, finish_reason) passes parsed and graded: a JSON-ready result."""
    from proofcheck.reward.structural import grade_structural
    from proofcheck.verification import parse_pass

    trials = []
    for text, finish in passes:
        p = parse_pass(text, row["n_steps"], finish)
        g = grade_structural(text, row["n_steps"], row["annotation"], finish)
        trials.append({"valid": p.status == "valid", "first_error_step": p.first_error_step, "outcome": p.outcome,
                       "score": g.score, "invalid_reason": p.invalid_reason})
    return {"proof_id": row["proof_id"], "is_correct": bool(row["is_correct"]),
            "first_error_step": int(row["first_error_step"]), "domain": row["domain"], "trials": trials}


def prompt_ids(tokenizer: Any, row: dict, chat_template_kwargs: dict[str, Any] | None = None) -> list[int]:
    """The row's verifier prompt as token ids, through the tokenizer's chat template (as TRL does)."""
    return tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=True,
                                         **(chat_template_kwargs or {}))["input_ids"]


def generate_vllm(llm: Any, prompts: list[tuple[int, list[int]]], rows: list[dict], *, passes: int,
                  max_new_tokens: int, temperature: float, seed: int,
                  constrain_format: bool = False) -> list[list[tuple[str, str]]]:
    """(text, finish_reason) of k passes for each `(row index, prompt ids)`, from a vLLM `LLM` in one
    batch (one n=k request per prompt).

    Each request is seeded with `seed + row index`: a row's passes do not depend on which rank or
    batch it lands in, and the ranks of a tensor-parallel group, which generate the same prompts,
    sample the same tokens. `constrain_format` constrains every pass to the answer format with
    structured outputs (`proofcheck.protocol.answer_regex` for the row's step count).
    """
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from proofcheck.protocol import answer_regex

    params = [SamplingParams(n=passes, temperature=temperature, top_p=1.0, top_k=0, max_tokens=max_new_tokens,
                             seed=seed + i, structured_outputs=StructuredOutputsParams(regex=answer_regex(
                                 rows[i]["n_steps"])) if constrain_format else None) for i, _ in prompts]
    outs = llm.generate([{"prompt_token_ids": ids} for _, ids in prompts], params, use_tqdm=False)
    return [[(o.text, o.finish_reason) for o in out.outputs] for out in outs]


def verify_rows_vllm(llm: Any, tokenizer: Any, rows: list[dict], *, passes: int, max_new_tokens: int,
                     temperature: float, seed: int, constrain_format: bool = False,
                     chat_template_kwargs: dict[str, Any] | None = None) -> list[dict]:
    """k passes per row from a vLLM `LLM` (`generate_vllm`), graded: one dict per row.

    `chat_template_kwargs` are the template's switches, as in training (see `template_kwargs`).
    """
    prompts = [(i, prompt_ids(tokenizer, r, chat_template_kwargs)) for i, r in enumerate(rows)]
    outs = generate_vllm(llm, prompts, rows, passes=passes, max_new_tokens=max_new_tokens, temperature=temperature,
                         seed=seed, constrain_format=constrain_format)
    return [grade_row(row, p) for row, p in zip(rows, outs, strict=True)]


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    gc = getattr(model, "generation_config", None)
    eos = gc.eos_token_id if gc is not None else None
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


def generate_hf(model: Any, tokenizer: Any, rows: list[dict], *, passes: int, max_new_tokens: int,
                temperature: float, batch_size: int, seed: int, synced_gpus: bool = False,
                chat_template_kwargs: dict[str, Any] | None = None) -> list[list[tuple[str, str]]]:
    """(text, finish_reason) of k sampled passes per row with `model.generate`, `batch_size` rows a call.

    Sampling is seeded with `seed` in a forked RNG (`distributed.seeded_rng`): evaluating never
    changes the training run's random streams. `synced_gpus`: every rank keeps stepping until all
    have finished (needed when parameters are sharded; `distributed.hf_generate_synced`).
    """
    import torch

    from proofcheck.train.distributed import batches, seeded_rng

    eos = eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out_rows: list[list[tuple[str, str]]] = []
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        with seeded_rng(seed, getattr(model, "device", None)), torch.no_grad():
            for batch in batches(rows, batch_size):
                texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True,
                                                       **(chat_template_kwargs or {})) for r in batch]
                enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
                out = model.generate(**enc, do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                                     num_return_sequences=passes, max_new_tokens=max_new_tokens,
                                     pad_token_id=pad_id, synced_gpus=synced_gpus)
                gen = out[:, enc["input_ids"].shape[1]:].tolist()
                out_rows += [[_finish_and_text(tokenizer, seq, eos) for seq in gen[i * passes:(i + 1) * passes]]
                             for i in range(len(batch))]
    finally:
        tokenizer.padding_side = old_side
    return out_rows


def verify_rows(model: Any, tokenizer: Any, rows: list[dict], *, passes: int, max_new_tokens: int,
                temperature: float, batch_size: int, seed: int,
                chat_template_kwargs: dict[str, Any] | None = None) -> list[dict]:
    """Generate k passes for each row with `model.generate` (`generate_hf`) and grade them (one dict per row)."""
    outs = generate_hf(model, tokenizer, rows, passes=passes, max_new_tokens=max_new_tokens, temperature=temperature,
                       batch_size=batch_size, seed=seed, chat_template_kwargs=chat_template_kwargs)
    return [grade_row(row, p) for row, p in zip(rows, outs, strict=True)]


def template_kwargs(trainer: Any) -> dict[str, Any]:
    """The chat template's switches TRL applies to every training prompt (GRPOTrainer's
    `chat_template_kwargs`, parsed from GRPOConfig's; e.g. Qwen3's `{"enable_thinking": true}`): the
    held-out evaluation uses the same, so a thinking verifier is evaluated thinking, with
    `eval_max_new_tokens` as its budget."""
    return dict(trainer.chat_template_kwargs)


def eval_backend(trainer: Any) -> str:
    """Which generation the held-out evaluation uses: the trainer's own vLLM when it has one
    (`vllm-colocate`: the engine in this process; `vllm-server`: `trl vllm-serve` through TRL's
    client, on the main process), else `transformers` (`model.generate` on every rank)."""
    if not trainer.args.use_vllm:
        return "transformers"
    return "vllm-colocate" if trainer.args.vllm_mode == "colocate" else "vllm-server"


def colocated_llm(trainer: Any) -> Any:
    """The trainer's colocated vLLM `LLM`, or None (no vLLM, or server mode)."""
    return trainer.vllm_generation.llm if eval_backend(trainer) == "vllm-colocate" else None
