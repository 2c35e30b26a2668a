"""The GPU check: one entry, `python benchmarks/gpu_check` (`__main__.py`; `bash benchmarks/gpu_check.sh` on the
lent machine). Its parts: `driver.py` (the stages under their limits, the results copied to $OUT), `stages.py`
(one stage per process), `train.py` (the GRPO stages), `hf_engine.py` (the k = 8 decision's pass engine),
`report.py` (the Markdown tables), `wheels.py` (`make gpu-wheels`), `site_links.py` (the checkout's packages on a
PYTHONPATH folder, for a machine where nothing is installed).
"""
