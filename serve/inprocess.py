"""In-process pass engine: vLLM's AsyncLLM (`vllm.v1.engine.async_llm.AsyncLLM`, which
`vllm.AsyncLLMEngine` aliases in 0.32), streaming DELTA outputs so that the k samples of one
request can be parsed as each finishes and the request aborted once the decision is fixed.

The base model and optionally one LoRA adapter (`lora=("name", "path")`, vLLM `enable_lora`
plus a `LoRARequest` per request) are served; a request picks the adapter by its name, the base
by its path or `served_name`. On the CPU build the settings of `proofcheck.serve.engine_args` apply.
"""

from __future__ import annotations

import uuid
from typing import Any

from proofcheck.serve.engine_args import engine_kwargs
from proofcheck.serve.engines import Generation, PassOutput, StopWhen


class InProcessEngine:
    """k passes from an in-process AsyncLLM; abort on early decision.

    Example:
        >>> eng = InProcessEngine("runs/tiny")  # doctest: +SKIP
        >>> gen = await eng.sample(messages, 8, temperature=1.0, max_tokens=512, seed=0)  # doctest: +SKIP
    """

    def __init__(self, model: str, *, lora: tuple[str, str] | None = None, seed: int = 0,
                 max_model_len: int = 4096, served_name: str | None = None,
                 chat_template_kwargs: dict[str, Any] | None = None, **engine_args: Any):
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        kwargs = engine_kwargs(lora=lora, max_model_len=max_model_len, **engine_args)
        self.model = model
        self.served_name = served_name or model
        self.lora = lora
        # e.g. {"enable_thinking": True} for Qwen3: the template's switches, set explicitly
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.engine = AsyncLLM.from_engine_args(
            AsyncEngineArgs(model=model, max_model_len=max_model_len, seed=seed, **kwargs))
        self.tokenizer = self.engine.get_tokenizer()

    @property
    def default_model(self) -> str:
        """The adapter when one is loaded (that is what was trained), else the base model."""
        return self.lora[0] if self.lora else self.served_name

    def model_names(self) -> list[str]:
        return [self.served_name] + ([self.lora[0]] if self.lora else [])

    def _lora_request(self, model: str | None) -> Any:
        name = model or self.default_model
        if name in (self.served_name, self.model):
            return None
        if self.lora and name == self.lora[0]:
            from vllm.lora.request import LoRARequest

            return LoRARequest(self.lora[0], 1, self.lora[1])
        raise ValueError(f"unknown model {name!r}; this engine serves {', '.join(self.model_names())}")

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of the chat-templated conversation, ready for the assistant's turn."""
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                  **self.chat_template_kwargs)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    async def sample(self, messages: list[dict[str, str]], n: int, *, temperature: float = 1.0,
                            max_tokens: int = 1024, seed: int | None = None, stop_when: StopWhen | None = None,
                            model: str | None = None, answer_regex: str | None = None) -> Generation:
        """`n` samples in one request (shared prefix); abort the rest once `stop_when` says so;
        `answer_regex` constrains them with vLLM structured outputs."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        lora_request = self._lora_request(model)
        ids = self.prompt_ids(messages)
        structured = StructuredOutputsParams(regex=answer_regex) if answer_regex else None
        params = SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed,
                                output_kind=RequestOutputKind.DELTA, structured_outputs=structured)
        request_id = f"verify-{uuid.uuid4().hex}"
        passes = [PassOutput(i) for i in range(n)]
        finished: list[PassOutput] = []
        gen = self.engine.generate(TokensPrompt(prompt_token_ids=ids), params, request_id,
                                   lora_request=lora_request)
        try:
            async for out in gen:
                newly = []
                for c in out.outputs:
                    slot = passes[c.index]
                    if slot.finished:
                        continue
                    slot.text += c.text
                    slot.completion_tokens += len(c.token_ids)
                    if c.finish_reason is not None:
                        slot.finish_reason = str(c.finish_reason)
                        newly.append(slot)
                finished.extend(newly)
                if newly and stop_when is not None and len(finished) < n and stop_when(list(finished)):
                    await self.engine.abort(request_id)
                    for p in passes:
                        p.cancelled = not p.finished
                    break
        except Exception as e:  # engine failure: the unfinished samples carry the error
            for p in passes:
                if not p.finished and not p.cancelled:
                    p.error = f"engine error: {type(e).__name__}: {e}"
        finally:
            await gen.aclose()
        return Generation(passes, len(ids))

    async def aclose(self) -> None:
        """Shut the engine down now (not at interpreter exit, when vLLM's __del__ finds modules gone)."""
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.shutdown()
            del engine
