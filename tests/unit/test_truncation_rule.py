"""One truncation rule: a completion cut by the token limit is invalid in GRPO rewards exactly as
in serving and scoring. TRL passes `completion_ids` (not a finish reason) to reward functions;
the reward derives the finish reason from them with the trainer's eos ids and max length."""

from __future__ import annotations

import pytest

from proofcheck.parsing import format_verdict
from proofcheck.reward.functions import FormatReward, MetaVerifierReward
from proofcheck.train.eval_generation import _finish_and_text
from proofcheck.verification import parse_pass

TEXT = format_verdict("step 1 is wrong", [(1, "bad")], 1)
ANN = '{"first_fatal_error_step": 1, "recoverable_error_steps": [-1]}'
EOS, MAX = 2, 4


@pytest.mark.parametrize(("ids", "engine_finish"), [
    ([7, 8, 9, EOS], "stop"),   # ended by EOS at the limit
    ([7, 8, EOS], "stop"),      # ended by EOS before the limit
    ([7, 8, 9], "stop"),        # shorter than the limit without EOS: a stop string ended it
    ([7, 8, 9, 10], "length"),  # the limit cut it
])
def test_reward_and_serving_agree(ids: list[int], engine_finish: str) -> None:
    served = parse_pass(TEXT, 3, engine_finish)
    for fn in (MetaVerifierReward(), FormatReward()):
        fn.configure_truncation([EOS], MAX)
        (score,) = fn([TEXT], annotation=[ANN], n_steps=[3], completion_ids=[ids])
        assert (score > 0) == (served.status == "valid")
    assert served.status == ("valid" if engine_finish == "stop" else "invalid")


def test_completion_ids_without_configuration_is_an_error() -> None:
    with pytest.raises(ValueError, match="configure_truncation"):
        MetaVerifierReward()([TEXT], annotation=[ANN], n_steps=[3], completion_ids=[[1, 2]])


class _Tok:
    """Decodes ids as their numbers, so the test sees exactly which tokens became text."""

    def decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        return " ".join(map(str, ids))


PAD = 0


@pytest.mark.parametrize(("ids", "text", "finish"), [
    ([7, 8, EOS, PAD, PAD], "7 8", "stop"),   # HF generate pads after the EOS: cut at the first one
    ([7, 8, EOS, 9, EOS], "7 8", "stop"),     # only the first EOS ends the sequence
    ([7, 8, EOS], "7 8", "stop"),
    ([EOS, PAD], "", "stop"),
    ([7, 8, 9, 10], "7 8 9 10", "length"),    # no EOS: max_new_tokens cut it
    ([], "", "length"),
])
def test_hf_generate_evaluation_applies_the_same_eos_rule(ids: list[int], text: str, finish: str) -> None:
    assert _finish_and_text(_Tok(), ids, {EOS}) == (text, finish)
