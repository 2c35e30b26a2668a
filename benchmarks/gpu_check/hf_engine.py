"""An in-process pass engine on transformers' `generate`, for machines without vLLM (the lent H200).

`HFPassEngine` speaks `proofcheck.serve.engines.PassEngine`: `sample(messages, n, ...)` generates the
`n` passes of one conversation in ONE `generate` call (`num_return_sequences=n`: the prompt is
encoded once and the n sequences decode as one batch), and calls `stop_when(finished)` each time a
pass emits its end-of-sequence token; once it returns True the decision is fixed and generation stops
for every sequence (the unfinished passes come back `cancelled`, with their partial text and tokens),
which is what vLLM's abort does for the engines the service uses. So `serve.verifier.Verifier` runs
the k-pass decision on it unchanged. Structured outputs (`answer_regex`) need vLLM: refused here.

Example:
    >>> engine = HFPassEngine(model, tokenizer)  # doctest: +SKIP
    >>> result = asyncio.run(Verifier(engine, passes=8).verify(problem, steps))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from proofcheck.serve.engines import Generation, PassOutput, StopWhen


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """The ids that end a pass: the generation config's EOS ids and the tokenizer's."""
    eos = getattr(model.generation_config, "eos_token_id", None)
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


def _pass_from(ids: list[int], index: int, eos: set[int], tokenizer: Any, cancelled: bool) -> PassOutput:
    """One generated sequence as a PassOutput: cut after its first EOS ("stop"), else "length", or
    `cancelled` (stopped by the decision) with the tokens it had."""
    end = next((i for i, t in enumerate(ids) if t in eos), None)
    if end is not None:
        return PassOutput(index, tokenizer.decode(ids[:end], skip_special_tokens=True), "stop", end + 1)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    if cancelled:
        return PassOutput(index, text, None, len(ids), cancelled=True)
    return PassOutput(index, text, "length", len(ids))


class _DecisionStop:
    """A transformers stopping criterion: records each pass as it emits EOS and stops the whole batch
    once `stop_when` says the decision is fixed (made a StoppingCriteria subclass in `criterion`)."""

    def __init__(self, prompt_len: int, eos: set[int], tokenizer: Any, stop_when: StopWhen | None) -> None:
        self.prompt_len, self.eos, self.tokenizer, self.stop_when = prompt_len, eos, tokenizer, stop_when
        self.finished: dict[int, PassOutput] = {}
        self.decided = False

    def check(self, input_ids: Any) -> Any:
        import torch

        last = input_ids[:, -1].tolist()
        for i, tok in enumerate(last):
            if i not in self.finished and tok in self.eos:
                self.finished[i] = _pass_from(input_ids[i, self.prompt_len:].tolist(), i, self.eos, self.tokenizer,
                                              False)
                if self.stop_when is not None and len(self.finished) < len(last) \
                        and self.stop_when(list(self.finished.values())):
                    self.decided = True
        done = [self.decided or i in self.finished for i in range(len(last))]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def criterion(state: _DecisionStop) -> Any:
    """`state` wrapped as a transformers StoppingCriteria (imported here: transformers is heavy)."""
    from transformers import StoppingCriteria

    class DecisionStop(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return state.check(input_ids)

    return DecisionStop()


class HFPassEngine:
    """k passes from a transformers model in this process, with the early stop of the k-pass decision."""

    def __init__(self, model: Any, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.eos = eos_ids(model, tokenizer)

    async def sample(self, messages: list[dict[str, str]], n: int, *, temperature: float = 1.0,
                     max_tokens: int = 1024, seed: int | None = None, stop_when: StopWhen | None = None,
                     model: str | None = None, answer_regex: str | None = None) -> Generation:
        """`n` sampled passes of `messages` in one `generate` call (see the module docstring)."""
        import torch
        from transformers import StoppingCriteriaList

        if answer_regex is not None:
            raise ValueError("HFPassEngine: structured outputs (answer_regex, --constrain) need a vLLM engine")
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                 return_dict=True, **self.chat_template_kwargs)["input_ids"]
        prompt = torch.tensor([ids], device=self.model.device)
        state = _DecisionStop(len(ids), self.eos, self.tokenizer, stop_when)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos)
        if seed is not None:
            torch.manual_seed(seed)
        with torch.no_grad():
            out = self.model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
                                      temperature=temperature, top_k=0, top_p=1.0, num_return_sequences=n,
                                      max_new_tokens=max_tokens, pad_token_id=pad,
                                      stopping_criteria=StoppingCriteriaList([criterion(state)]))
        passes = [state.finished.get(i) or _pass_from(out[i, len(ids):].tolist(), i, self.eos, self.tokenizer,
                                                      state.decided) for i in range(n)]
        return Generation(passes, prompt_tokens=len(ids))

    async def aclose(self) -> None:
        """Nothing to close: the model belongs to the caller."""
